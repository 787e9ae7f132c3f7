#!/usr/bin/env python3
"""Imports between a crate's modules only go one way: down the crate's layers, and never around
a circle.

For each crate, the graph of its top-level modules (`src/x.rs` or `src/x/`) is read from the
`crate::x` paths of the code (comments, strings and test code left out: `tests.rs`,
`*_tests.rs` and `#[cfg(test)] mod … { … }` may import anything). A circle — modules that import
each other, directly or around a loop — means neither can be read, tested or replaced without
the other.

LAYERS below puts each top-level module of the two library crates in a layer, bottom first
(docs/design.md draws them): a module may import its own layer and the ones below it, and an
import of a module in a layer above is an error, as is a module that no layer names (a new
module is placed when it is added). Inside a layer, and in the crates LAYERS does not list,
only circles are errors.

KNOWN below may list a circle that is being broken (it is empty: the last ones were broken
when this check came in); the check fails when a circle appears that is not inside one of
them, and reports a listed one that is gone so that its entry is deleted (the list only
shrinks).

    python3 tests/layers.py            # exit 1 on a new circle or a stale entry
    python3 tests/layers.py --graph    # print each crate's module graph
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["crates/zarrow", "crates/zarrow-datafusion", "crates/zarrow-cli", "crates/zarrow-python"]

# crate -> its layers, bottom first: (name, modules).
LAYERS = {
    "crates/zarrow": [
        ("configuration", {"options", "error", "metrics", "task", "grid", "key", "text"}),
        ("I/O", {"remote", "icechunk", "store"}),
        ("format", {"data_type", "codec", "metadata"}),
        ("arrays and decoding", {"array", "decode"}),
        ("nodes and tables", {"node", "tree", "table"}),
        ("scan and write", {"scan", "reader", "write"}),
    ],
    "crates/zarrow-datafusion": [
        ("settings and errors", {"error", "options", "metrics", "guards"}),
        ("stores", {"store", "remote_files"}),
        ("pruning", {"pruning", "coordinates", "index_columns"}),
        ("scan and write", {"opener", "source", "predicate", "sink", "commit"}),
        ("tables and formats", {"table", "format"}),
        ("session", {"factory", "session", "insert"}),
    ],
}

# crate -> circles (sets of modules) still to be broken.
KNOWN = {}


def strip(src):
    """The code without comments, string literals and inline test modules."""
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    src = re.sub(r'r#*"(?:.|\n)*?"#*', '""', src)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", src):
        if m.start() < i:
            continue
        out.append(src[i : m.start()])
        depth, j = 1, m.end()
        while j < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            j += 1
        i = j
    out.append(src[i:])
    return "".join(out)


def modules(src_dir):
    """Top-level module name -> its files (test files left out)."""
    mods = {}
    for dirpath, _, files in os.walk(src_dir):
        for name in files:
            if not name.endswith(".rs") or name == "tests.rs" or name.endswith("_tests.rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), src_dir)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            if rel and rel[0] != "bin":
                mods.setdefault(rel[0], []).append(os.path.join(dirpath, name))
    return mods


def imports(mods):
    """Module -> the modules of the same crate it names (`crate::m`, `use crate::{m, …}`)."""
    edges = {m: set() for m in mods}
    for mod, files in mods.items():
        for path in files:
            code = strip(open(path, encoding="utf-8").read())
            names = set(re.findall(r"\bcrate::(\w+)", code))
            for group in re.findall(r"\bcrate::\{([^;]*?)\}\s*;", code, flags=re.S):
                names.update(re.findall(r"(?:^|[,{])\s*(\w+)", group))
            edges[mod].update(n for n in names if n in mods and n != mod)
    return edges


def circles(edges):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def against_layers(crate, edges):
    """The errors of a crate's imports against its LAYERS: upward imports, unplaced modules."""
    layers = LAYERS.get(crate)
    if layers is None:
        return []
    rank = {m: i for i, (_, mods) in enumerate(layers) for m in mods}
    errors = [f"{crate}: module {m} is in no layer: add it to LAYERS in tests/layers.py"
              for m in sorted(edges) if m not in rank]
    for m in sorted(edges):
        for w in sorted(edges[m]):
            if m in rank and w in rank and rank[w] > rank[m]:
                errors.append(f"{crate}: {m} ({layers[rank[m]][0]}) imports {w}, "
                              f"a layer above it ({layers[rank[w]][0]})")
    errors += [f"{crate}: LAYERS names {m}, which is no module: delete it"
               for m in sorted(rank) if m not in edges]
    return errors


def self_check():
    """The checks must catch what they are for: an upward import, an unplaced module, a circle."""
    edges = {m: set() for _, mods in LAYERS["crates/zarrow"] for m in mods}
    edges["options"].add("table")
    edges["unplaced"] = set()
    errors = against_layers("crates/zarrow", edges)
    assert any("options (configuration) imports table" in e for e in errors), errors
    assert any("module unplaced is in no layer" in e for e in errors), errors
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def main():
    self_check()
    failed = False
    for crate in CRATES:
        edges = imports(modules(os.path.join(ROOT, crate, "src")))
        if "--graph" in sys.argv:
            print(f"{crate}:")
            for m in sorted(edges):
                print(f"  {m} -> {', '.join(sorted(edges[m])) or '-'}")
        for error in against_layers(crate, edges):
            print(error)
            failed = True
        known = KNOWN.get(crate, [])
        found = circles(edges)
        for c in found:
            detail = "; ".join(f"{m} -> {', '.join(sorted(edges[m] & c))}" for m in sorted(c))
            if any(c <= k for k in known):
                print(f"{crate}: known circle, to be broken: {detail}")
            else:
                print(f"{crate}: NEW circle between {sorted(c)}: {detail}")
                failed = True
        for k in known:
            if not any(c & k for c in found):
                print(f"{crate}: the circle {sorted(k)} is gone: delete it from KNOWN")
                failed = True
    if failed:
        sys.exit(1)
    print("layers: every import goes down its crate's layers; no new circle")


if __name__ == "__main__":
    main()
