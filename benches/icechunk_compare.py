#!/usr/bin/env python3
"""The same data as a plain zarr store and committed into an Icechunk repository: the four
queries of `sql_compare.py`, each as its own `zarrow sql` process, store and repository
alternating. Target: the repository within 10 % of the store.

Run from the repository root with the Icechunk venv (`bash tests/fixtures/setup_venvs.sh
icechunk`: icechunk 2 needs Python >= 3.12) and a release build
(`cargo build --release -p zarrow-cli`):

    .venv-icechunk/bin/python benches/icechunk_compare.py            # 10M rows, 1M-row chunks

1. Generates (or reuses) `sql_compare.py`'s data set — the same generator, seed and zarr-python
   version — as a zarr v3 group in `--data-dir`.
2. Commits every key of that group, byte for byte, into an Icechunk repository beside it
   (`bench.icechunk`, local filesystem storage, one commit, tagged `bench`), so both sides hold
   the same encoded chunks: what differs is only how they are found (a manifest lookup per
   chunk instead of a file path).
3. Checks both give the same rows, then times each query on each side (`--repeat` rounds
   after a warm-up; sides alternate which goes first) and prints the medians and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sql_compare as sc  # noqa: E402  (its generator, queries and process timing)

import icechunk  # noqa: E402
from zarr.core.buffer import default_buffer_prototype  # noqa: E402


async def copy_into(store, source: Path) -> int:
    """Every file of `source` as a key of `store`, metadata documents first."""
    files = sorted((p for p in source.rglob("*") if p.is_file()),
                   key=lambda p: (p.name != "zarr.json", len(p.parts), str(p)))
    buffer = default_buffer_prototype().buffer
    for p in files:
        await store.set(p.relative_to(source).as_posix(), buffer.from_bytes(p.read_bytes()))
    return len(files)


def ensure_repository(zarr_path: Path, repo_path: Path) -> None:
    stamp = repo_path.with_suffix(".stamp.json")
    source_stamp = (zarr_path.parent / "stamp.json").read_text()
    if repo_path.is_dir() and stamp.is_file() and stamp.read_text() == source_stamp:
        sc.log(f"reusing {repo_path}")
        return
    sc.remove(repo_path)
    sc.log(f"committing {zarr_path} into {repo_path} (icechunk {icechunk.__version__})")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_path)))
    session = repo.writable_session("main")
    n = asyncio.run(copy_into(session.store, zarr_path))
    snapshot = session.commit(f"{n} keys of {zarr_path.name}")
    repo.create_tag("bench", snapshot_id=snapshot)
    stamp.write_text(source_stamp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--chunk", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=sc.REPO / "target/bench-data")
    ap.add_argument("--zarrow", type=Path, default=sc.REPO / "target/release/zarrow")
    args = ap.parse_args()
    # what sql_compare's helpers read of its own arguments
    args.control, args.zarr_string_type, args.zarr_option, args.parquet_string_type = (
        False, None, [], "view")
    if not args.zarrow.is_file():
        ap.error(f"no zarrow binary at {args.zarrow} (cargo build --release -p zarrow-cli)")

    stamp = sc.ensure_data(args, args.rows, parquet=False)
    root = Path(stamp["root"])
    plain = root / "bench.zarr"
    repo_path = root / "bench.icechunk"
    ensure_repository(plain, repo_path)
    sources = {"store": str(plain), "repository": f"icechunk+file://{repo_path}@bench"}

    times: dict[str, dict[str, list[float]]] = {q: {s: [] for s in sources} for q, *_ in sc.QUERIES}
    expected: dict[str, list[str]] = {}
    for round_ in range(args.repeat + 1):
        sc.log("warm-up round" if round_ == 0 else f"round {round_}/{args.repeat}")
        order = list(sources) if round_ % 2 == 0 else list(reversed(sources))
        for qid, _, sql, _ in sc.QUERIES:
            for side in order:
                cmd = [str(args.zarrow), "sql", "--format", "csv",
                       sql.replace("FROM t", f"FROM {sc.lit(sources[side])}")]
                seconds, _, out = sc.timed(cmd)
                got = sc.canonical(out)
                if expected.setdefault(qid, got) != got:
                    sys.exit(f"RESULT MISMATCH on {qid}: {side}\n{expected[qid][:5]}\n{got[:5]}")
                if round_ > 0:
                    times[qid][side].append(seconds)

    rows = []
    for qid, desc, _, _ in sc.QUERIES:
        s, r = (statistics.median(times[qid][k]) for k in ("store", "repository"))
        rows.append([qid, desc, f"{s:.3f}", f"{r:.3f}", f"{r / s:.2f}"])
    print(f"{args.rows:,} rows, {args.chunk:,}-row chunks; median of {args.repeat} runs, seconds "
          f"(each query its own zarrow process; {sc.cpu_model()}, {sc.os.cpu_count()} cores)")
    print(sc.table(["query", "what", "store", "repository", "repo/store"], rows, markdown=True))
    out = root / "icechunk_compare_results.json"
    out.write_text(json.dumps({"stamp": sc.machine_facts(args), "rows": args.rows,
                               "chunk": args.chunk, "times": times}, indent=1) + "\n")
    sc.log(f"numbers in {out}")


if __name__ == "__main__":
    main()
