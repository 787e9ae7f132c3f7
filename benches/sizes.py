#!/usr/bin/env python3
"""The sizes of what users install: the `zarrow` binary, the Python extension (and its wheel),
against datafusion-python's extension installed next to it.

    cargo build --release -p zarrow-cli -p zarrow-python
    .venv-zarr3/bin/python benches/sizes.py --datafusion-python target/venv-zarrow-wheel \
        [--wheel dist/zarrow-*.whl] [--before-zarrow OLD_BINARY] --json target/sizes_results.json

Each binary is reported as it is and stripped of symbols (`strip -o`, into a temporary file),
so a build with symbols and one without compare fairly. Writes a result
file for benches/report.py (copy it into benches/results/ to publish). Needs numpy only for the
stamp it shares with sql_compare.py (run it with .venv-zarr3/bin/python).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sql_compare import REPO, run_stamp  # noqa: E402  (the stamp every harness writes)


def sizes(path: Path) -> dict:
    """{"bytes": as it is, "stripped": without symbols}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stripped"
        subprocess.run(["strip", "-o", str(out), str(path)], check=True)
        return {"path": str(path), "bytes": path.stat().st_size, "stripped": out.stat().st_size}


def wheel_sizes(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as z:
        ext = [i for i in z.infolist() if i.filename.endswith(".so")]
        if len(ext) != 1:
            sys.exit(f"{wheel}: expected one extension module, found {[i.filename for i in ext]}")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(z.extract(ext[0], tmp))
            inner = sizes(path)
    return {"path": str(wheel), "bytes": wheel.stat().st_size, "extension": inner}


def datafusion_extension(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages/datafusion/_internal*.so"))
    if not found:
        sys.exit(f"no datafusion-python extension under {venv}")
    return found[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zarrow", type=Path, default=REPO / "target/release/zarrow")
    ap.add_argument("--extension", type=Path, default=REPO / "target/release/lib_zarrow.so",
                    help="the Python extension as cargo builds it")
    ap.add_argument("--wheel", type=Path, default=None, help="a release wheel (maturin build --release)")
    ap.add_argument("--datafusion-python", type=Path, required=True,
                    help="a venv with datafusion-python installed (its extension is the yardstick)")
    ap.add_argument("--before-zarrow", type=Path, default=None,
                    help="a zarrow binary of an earlier build, reported next to this one")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    profile = tomllib.loads((REPO / "Cargo.toml").read_text()).get("profile", {}).get("release", {})
    dfp = datafusion_extension(args.datafusion_python)
    dist = next(iter(dfp.parent.parent.glob("datafusion-*.dist-info")), None)
    version = dist.name.removeprefix("datafusion-").removesuffix(".dist-info") if dist else "?"
    data = {
        "stamp": run_stamp(),
        "release_profile": profile,
        "zarrow": sizes(args.zarrow),
        "extension": sizes(args.extension),
        "datafusion_python": {**sizes(dfp), "version": version},
    }
    if args.wheel:
        data["wheel"] = wheel_sizes(args.wheel)
    if args.before_zarrow:
        data["before_zarrow"] = sizes(args.before_zarrow)
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    for key in ("before_zarrow", "zarrow", "extension", "datafusion_python"):
        if key in data:
            print(f"{key:18} {mb(data[key]['bytes']):>10}  stripped {mb(data[key]['stripped']):>10}")
    print(f"results: {args.json}")


if __name__ == "__main__":
    main()
