#!/usr/bin/env python3
"""No Rust function outside tests is longer than 120 lines: a check that fails on a new one.

A function is counted from the line of its `fn` to the line of its closing brace. Comments,
string and character literals are blanked first (so braces inside them do not count), and
test code is left out: `tests.rs`, `*_tests.rs`, files under a `tests/` or `benches/` folder
(the benchmark crate's `benches/src` is code, and checked), and `#[cfg(test)]` items (`mod tests { … }`, a single test fn). A fn nested in another is
measured on its own and still counts inside the outer one.

    python3 tests/function_lengths.py            # exit 1, naming file:line and length
    python3 tests/function_lengths.py --top 10   # the longest functions
    python3 tests/function_lengths.py --self-test
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 120
SKIP_DIRS = {"target", "tests", "benches", ".git", "node_modules"}


def blank(src):
    """`src` with comments and string/char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(src)

    def keep_lines(s):
        return re.sub(r"[^\n]", " ", s)

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(keep_lines(src[i:j]))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(keep_lines(src[i:j]))
            i = j
        elif (m := re.match(r'b?r(#*)"', src[i:])) and (i == 0 or not _ident(src[i - 1])):
            end = src.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(keep_lines(src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(keep_lines(src[i : j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}', '{') or a lifetime/label ('a, 'static).
            m = re.match(r"'(\\(?:u\{[0-9a-fA-F]*\}|x..|.)|[^\\'\n])'", src[i:])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _ident(c):
    return c.isalnum() or c == "_"


def close(code, open_at):
    """The index of the brace closing the one at `open_at`."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def without_tests(code):
    """`code` with `#[cfg(test)]` items blanked (lines kept)."""
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]", code))):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue  # `#[cfg(test)] mod tests;` or a `use`
        end = close(code, brace)
        code = code[: m.start()] + re.sub(r"[^\n]", " ", code[m.start() : end + 1]) + code[end + 1 :]
    return code


FN = re.compile(r"\bfn\s+([A-Za-z_]\w*)")


def functions(src):
    """(name, first line, length in lines) of each fn with a body in `src`."""
    code = without_tests(blank(src))
    found = []
    for m in FN.finditer(code):
        # The body is the first `{` after the signature, unless a `;` ends it first (a trait
        # method's declaration). Parentheses and angle brackets hold no braces or `;` in a
        # signature, except in `where` clauses' types, which have neither either.
        depth, j = 0, m.end()
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch in "{;":
                break
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        end = close(code, j)
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end) + 1
        found.append((m.group(1), first, last - first + 1))
    return found


def is_test_file(rel):
    name = os.path.basename(rel)
    return name == "tests.rs" or name.endswith("_tests.rs")


def rust_files():
    for base in ("crates", "examples", os.path.join("benches", "src")):
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, base)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(files):
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
                if name.endswith(".rs") and not is_test_file(rel):
                    yield rel


def all_functions():
    for rel in rust_files():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            for name, line, length in functions(f.read()):
                yield rel, line, name, length


SAMPLE = r'''
fn short() { let s = "}}}"; let c = '}'; let r = r#"{"#; }
/* a { comment */
fn outer<'a>(x: &'a str) -> impl Fn() {
    // } a brace in a comment
    fn inner() {
        let _ = '{';
    }
    let label = 'a';
    move || ()
}
trait T { fn declared(&self); fn provided(&self) { } }
#[cfg(test)]
mod tests {
    fn in_tests() {
    }
}
fn last(v: [u8; 2]) -> u8 {
    v[0]
}
'''


def self_test():
    got = [(name, line, length) for name, line, length in functions(SAMPLE)]
    want = [
        ("short", 2, 1),
        ("outer", 4, 8),
        ("inner", 6, 3),
        ("provided", 12, 1),
        ("last", 18, 3),
    ]
    if got != want:
        print(f"function_lengths self-test: got {got}, want {want}")
        return 1
    print("function_lengths self-test: ok")
    return 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    found = sorted(all_functions(), key=lambda f: -f[3])
    if "--top" in argv:
        top = int(argv[argv.index("--top") + 1])
        for rel, line, name, length in found[:top]:
            print(f"{length:5}  {rel}:{line}  {name}")
        return 0
    long = [f for f in found if f[3] > LIMIT]
    for rel, line, name, length in long:
        print(f"{rel}:{line}: fn {name} is {length} lines (at most {LIMIT} outside tests)")
    if long or self_test():
        return 1
    print(f"function lengths: no function over {LIMIT} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
