#!/usr/bin/env python3
"""The Python extension builds on the workspace's dependency builds: every crate it compiles,
with the features it compiles it with, is one `cargo test --workspace` compiles too.

maturin builds `zarrow-python` alone, and cargo resolves the features of that package's
dependencies alone: where the CLI, Ballista or the tests' dev-dependencies turn on one more
feature of a crate (tokio's `full`, serde_json's `preserve_order`, …), the extension's build of
that crate and of everything above it, DataFusion included, is another build. The list in
`crates/zarrow-python/Cargo.toml` ("Build reuse") asks for those features; this check fails when
the list is stale and names what to add. Standard library only; run from anywhere.

    python3 tests/feature_unification.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def nodes(*args: str) -> set[str]:
    """The (crate, features) pairs of a `cargo tree` (host and target builds apart)."""
    out = subprocess.run(["cargo", "tree", "--prefix", "none", "-f", "{p}|{f}", *args],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return {line.replace(" (*)", "").replace(" (proc-macro)", "")
            for line in out.splitlines() if "|" in line}


def main() -> int:
    workspace = nodes("--workspace", "-e", "normal,build,dev")
    wheel = nodes("-p", "zarrow-python", "-e", "normal,build")
    missing = sorted(wheel - workspace)
    if not missing:
        print(f"feature unification: the extension's {len(wheel)} crate builds are the "
              "workspace's")
        return 0
    print("feature unification: maturin would build these crates again, with other features "
          "than `cargo test --workspace` (add what the workspace has to the \"Build reuse\" "
          "list in crates/zarrow-python/Cargo.toml):", file=sys.stderr)
    for node in missing:
        crate, features = node.split("|")
        name = crate.split(" v")[0]
        others = sorted(n.split("|")[1] for n in workspace if n.split(" v")[0] == name)
        print(f"  {crate}: [{features}]; the workspace: {others}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
