#!/usr/bin/env python3
"""Check that every relative link in README.md and docs/*.md resolves: the file exists and, for
`page.md#anchor`, the page has a heading with that anchor (GitHub's rule: lower case, spaces to
`-`, punctuation dropped). External links (`http:`, `https:`, `mailto:`) are not fetched.

The crates' READMEs (crates/*/README.md) are shown by crates.io and PyPI without the repository
around them: they may hold no relative link or image at all, only absolute URLs (or name the
repository's files inline).

    python3 docs/check_links.py          # exit 1 and list the broken links, if any
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# Any link or image target, inline (`[text](target)`, `![alt](target)`), in angle brackets or as
# a reference definition (`[name]: target`).
ANY_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)|^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
ABSOLUTE = re.compile(r"[a-z][a-z0-9+.-]*:", re.I)
FENCE = re.compile(r"^(```|~~~)")


def text_outside_code(path: Path) -> list[tuple[int, str]]:
    """The file's lines outside fenced code blocks, with inline code spans blanked."""
    out, fenced = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, re.sub(r"`[^`]*`", "``", line)))
    return out


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (outside code blocks), as GitHub makes them."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            found.add(re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-"))
    return found


def check(path: Path) -> list[str]:
    bad = []
    for n, line in text_outside_code(path):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(REPO)}:{n}: {target}"
            if not dest.exists():
                bad.append(f"{where}: no such file")
            elif REPO not in dest.parents and dest != REPO:
                bad.append(f"{where}: outside the repository")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{where}: no heading with anchor #{anchor}")
    return bad


def check_standalone(path: Path) -> list[str]:
    """A README shown without the repository: every link and image target is an absolute URL."""
    bad = []
    for n, line in text_outside_code(path):
        for inline, reference in ANY_TARGET.findall(line):
            target = inline or reference
            if not ABSOLUTE.match(target):
                bad.append(
                    f"{path.relative_to(REPO)}:{n}: {target}: a relative link in a crate's "
                    "README (crates.io and PyPI show it without the repository): use an "
                    "absolute URL, or name the file inline"
                )
    return bad


def main() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    crate_readmes = sorted((REPO / "crates").glob("*/README.md"))
    bad = [b for p in pages for b in check(p)]
    bad += [b for p in crate_readmes for b in check_standalone(p)]
    for b in bad:
        print(b)
    if bad:
        sys.exit(f"{len(bad)} broken link(s)")
    print(f"links ok in {len(pages)} pages and {len(crate_readmes)} crate READMEs")


if __name__ == "__main__":
    main()
