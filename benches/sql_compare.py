#!/usr/bin/env python3
"""zarr vs Parquet under the same SQL engine: zarrow's DataFusion table over a zarr v3 group
against DataFusion's own Parquet reader, plus zarr-python's read of one string column.

Run from the repository root with the zarr-python 3 venv (`bash tests/fixtures/setup_venvs.sh`)
and release builds (`cargo build --release -p zarrow-cli -p zarrow-benches --bin zarrow --bin
read_column`):

    .venv-zarr3/bin/python benches/sql_compare.py                 # 10M rows, 1M-row chunks
    .venv-zarr3/bin/python benches/sql_compare.py --markdown --rss-rows 20000000

What it does (benches/README.md has the details):

1. Generates, deterministically, `--rows` rows — `label` (1000 distinct strings, ~12 B),
   `id` (~20 B, about 1.5 % contain 'zz'), `n` int64, `score` float64 — as a zarr v3 group
   written by zarr-python (vlen-utf8 / bytes + zstd level 3, `--chunk`-row chunks, consolidated
   metadata) and as one Parquet file written from that group by DataFusion through
   `zarrow sql "COPY …"` (zstd(3), `--chunk`-row row groups). Both are kept in `--data-dir` and
   reused while their parameters match (a JSON stamp).
2. Checks both sides hold the same rows, and with EXPLAIN that every query reads only the
   columns it needs and is not answered from statistics.
3. Times each query as its own `zarrow sql --format csv` process, zarr and Parquet alternating,
   one warm-up round then `--repeat` rounds; wall time and the process's peak RSS (wait4).
   The zarr and Parquet results must be identical (sorted CSV lines), else it stops.
4. Times zarr-python's `open_array(…/label)[:]` (in this process) against zarrow's
   its read through the scan, one partition per core (in the `read_column` process, timed
   inside it), and
   `zarrow export …/label --format arrow-stream --output /dev/null` as a whole process.
5. With `--rss-rows`, generates that many rows (zarr only) and reports the GROUP BY's peak RSS.
6. q1's control (unless `--no-control`): q1 over the `label` array stored without compression
   against the same Parquet file, so the report shows how much of q1's ratio is zstd.

Prints a table (`--markdown`: also as markdown) and writes the numbers to
`<data-dir>/sql_compare_results.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

warnings.simplefilter("ignore")  # zarr's "unstable specification" warning for the string dtype

import zarr  # noqa: E402
from zarr.codecs import ZstdCodec  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stamp import cpu_model, run_stamp  # noqa: E402,F401  (cluster/icechunk use sc.cpu_model)

REPO = Path(__file__).resolve().parent.parent
SEED = 20240601
# Bump when the generated data changes, so stale data dirs are rewritten.
GENERATOR_VERSION = 1
ZSTD_LEVEL = 3
N_LABELS = 1000
ID_ALPHABET = b"abcdefghijklmnopqrstuvwxyz0123456789"
ID_MIN_LEN, ID_MAX_LEN = 14, 26  # uniform → 20 B on average
LABEL_MIN_LEN, LABEL_MAX_LEN = 6, 18  # uniform → 12 B on average
SDT = np.dtypes.StringDType()
GIB = 1 << 30

# name, description, SQL over table `t`, the columns its scan must read
QUERIES = [
    ("q1", "GROUP BY label", "SELECT label, count(*) FROM t GROUP BY label", {"label"}),
    ("q2", "id LIKE '%zz%'", "SELECT count(*) FROM t WHERE id LIKE '%zz%'", {"id"}),
    # every column decoded; sum(n) and length() keep DataFusion from answering min/max from
    # Parquet statistics (it does when all aggregates are min/max/count); no float sum, whose
    # last digits would depend on the summation order
    (
        "q3",
        "full scan",
        "SELECT max(label), max(length(id)), sum(n), max(score) FROM t",
        {"label", "id", "n", "score"},
    ),
    ("q4", "projection (id)", "SELECT max(length(id)) FROM t", {"id"}),
]


# ---------------------------------------------------------------------------------------------
# data generation


def vocabulary() -> np.ndarray:
    """N_LABELS distinct lowercase words, LABEL_MIN_LEN..LABEL_MAX_LEN bytes (uniform)."""
    rng = np.random.default_rng([SEED, 1 << 20])
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: dict[str, None] = {}
    while len(seen) < N_LABELS:
        n = int(rng.integers(LABEL_MIN_LEN, LABEL_MAX_LEN + 1))
        seen.setdefault("".join(letters[i] for i in rng.integers(0, 26, n)), None)
    return np.array(list(seen), dtype=SDT)


def make_chunk(index: int, n: int, vocab: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The rows of chunk `index` (n rows), and the label codes; depends only on (SEED, index, n)."""
    rng = np.random.default_rng([SEED, index])
    codes = rng.integers(0, len(vocab), n)
    label = vocab[codes]
    # ids: random [a-z0-9] strings, NUL-padded in a fixed-width byte matrix (numpy's S dtype
    # drops the trailing NULs); 'zz' occurs in ~1.5 % of them
    width = ID_MAX_LEN
    alphabet = np.frombuffer(ID_ALPHABET, dtype=np.uint8)
    lengths = rng.integers(ID_MIN_LEN, ID_MAX_LEN + 1, n)
    buf = alphabet[rng.integers(0, len(alphabet), (n, width), dtype=np.uint8)]
    buf[np.arange(width)[None, :] >= lengths[:, None]] = 0
    ids = buf.view(f"S{width}").ravel().astype(SDT)
    data = {
        "label": label,
        "id": ids,
        "n": rng.integers(0, 1_000_000, n, dtype=np.int64),
        "score": rng.standard_normal(n),
    }
    return data, codes


def fresh_tmp(path: Path) -> Path:
    """An empty place beside the group `path` to write it in (see `replace_with`)."""
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    return tmp


def replace_with(tmp: Path, path: Path) -> None:
    """The group written at `tmp`, consolidated, becomes `path` (a run stopped half-way leaves
    no group at `path` that looks complete)."""
    zarr.consolidate_metadata(str(tmp))
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def write_zarr(path: Path, rows: int, chunk: int) -> dict:
    """The zarr v3 group; returns facts about the data."""
    tmp = fresh_tmp(path)
    group = zarr.create_group(store=str(tmp), zarr_format=3, overwrite=True)
    common = dict(
        shape=(rows,),
        chunks=(chunk,),
        compressors=ZstdCodec(level=ZSTD_LEVEL),
        dimension_names=["row"],
    )
    arrays = {
        "label": group.create_array("label", dtype=str, **common),
        "id": group.create_array("id", dtype=str, **common),
        "n": group.create_array("n", dtype="int64", **common),
        "score": group.create_array("score", dtype="float64", **common),
    }
    vocab = vocabulary()
    label_counts = np.zeros(len(vocab), dtype=np.int64)
    label_bytes = id_bytes = zz = 0
    started = time.perf_counter()
    for index, start in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - start)
        data, codes = make_chunk(index, n, vocab)
        for name, values in data.items():
            arrays[name][start : start + n] = values
        # all strings are ASCII: characters = bytes
        label_bytes += int(np.strings.str_len(data["label"]).sum())
        id_bytes += int(np.strings.str_len(data["id"]).sum())
        zz += int((np.strings.find(data["id"], "zz") >= 0).sum())
        label_counts += np.bincount(codes, minlength=len(vocab))
        log(f"  zarr: rows {start + n:,}/{rows:,} ({time.perf_counter() - started:.1f} s)")
    replace_with(tmp, path)
    return {
        "distinct_labels": int((label_counts > 0).sum()),
        "label_avg_bytes": round(label_bytes / rows, 2),
        "id_avg_bytes": round(id_bytes / rows, 2),
        "id_zz_rows": zz,
    }


def write_parquet(zarrow: Path, zarr_path: Path, path: Path, chunk: int) -> None:
    """One Parquet file written by DataFusion from the zarr group (COPY through zarrow)."""
    tmp = path.with_name("tmp-" + path.name)  # keeps the .parquet extension: a single file
    remove(tmp)
    sql = (
        f"COPY (SELECT label, id, n, score FROM {lit(zarr_path)}) TO {lit(tmp)} "
        f"STORED AS PARQUET OPTIONS ('format.compression' 'zstd({ZSTD_LEVEL})', "
        f"'format.max_row_group_size' '{chunk}')"
    )
    run_checked([str(zarrow), "sql", "--format", "csv", sql])
    if not tmp.is_file():
        sys.exit(f"COPY did not write a single Parquet file at {tmp}")
    remove(path)
    tmp.rename(path)


def write_label_uncompressed(zarr_path: Path, path: Path) -> None:
    """The `label` array of `zarr_path` again, same chunks, without compression: q1's control."""
    tmp = fresh_tmp(path)
    src = zarr.open_array(store=str(zarr_path / "label"), mode="r")
    group = zarr.create_group(store=str(tmp), zarr_format=3, overwrite=True)
    dst = group.create_array("label", dtype=str, shape=src.shape, chunks=src.chunks,
                             compressors=None, dimension_names=["row"])
    step = src.chunks[0]
    for start in range(0, src.shape[0], step):
        dst[start : start + step] = src[start : start + step]
    replace_with(tmp, path)


def write_label_categorical(path: Path, rows: int, chunk: int) -> None:
    """`label` as AnnData stores a pandas categorical, in a dataframe group of its own: int16
    `codes` (what pandas uses for 1,000 categories) into a `categories` string array, the same
    rows, chunks and zstd level as `bench.zarr`, and the `_index` anndata requires (row numbers
    as strings, as anndata makes them). Written with zarr-python in anndata's layout and
    attributes, so anndata reads it as an `obs` frame with a categorical column."""
    tmp = fresh_tmp(path)
    vocab = vocabulary()
    group = zarr.create_group(store=str(tmp), zarr_format=3, overwrite=True, attributes={
        "encoding-type": "dataframe", "encoding-version": "0.2.0", "_index": "_index",
        "column-order": ["label"]})
    common = dict(shape=(rows,), chunks=(chunk,), compressors=ZstdCodec(level=ZSTD_LEVEL))
    index = group.create_array("_index", dtype=str, **common,
                               attributes={"encoding-type": "string-array",
                                           "encoding-version": "0.2.0"})
    label = group.create_group("label", attributes={
        "encoding-type": "categorical", "encoding-version": "0.2.0", "ordered": False})
    codes = label.create_array("codes", dtype="int16", **common,
                               attributes={"encoding-type": "array", "encoding-version": "0.2.0"})
    categories = label.create_array("categories", dtype=str, shape=(len(vocab),),
                                    chunks=(len(vocab),), compressors=ZstdCodec(level=ZSTD_LEVEL),
                                    attributes={"encoding-type": "string-array",
                                                "encoding-version": "0.2.0"})
    categories[:] = vocab
    for i, start in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - start)
        codes[start : start + n] = make_chunk(i, n, vocab)[1].astype(np.int16)
        index[start : start + n] = np.arange(start, start + n).astype(str).astype(SDT)
    replace_with(tmp, path)


def ensure_data(args, rows: int, parquet: bool) -> dict:
    """Generate (or reuse) the data set for `rows`; returns its stamp."""
    root = args.data_dir / f"r{rows}_c{args.chunk}"
    root.mkdir(parents=True, exist_ok=True)
    zarr_path, parquet_path, stamp_path = root / "bench.zarr", root / "bench.parquet", root / "stamp.json"
    want = {
        "generator_version": GENERATOR_VERSION,
        "seed": SEED,
        "rows": rows,
        "chunk": args.chunk,
        "zstd_level": ZSTD_LEVEL,
    }
    stamp = json.loads(stamp_path.read_text()) if stamp_path.is_file() else {}
    if stamp.get("zarr", {}).get("params") != want or not zarr_path.is_dir():
        log(f"generating {rows:,} rows as zarr v3 in {zarr_path} (zarr-python {zarr.__version__})")
        started = time.perf_counter()
        facts = write_zarr(zarr_path, rows, args.chunk)
        stamp = {"zarr": {"params": want, "facts": facts, "zarr_python": zarr.__version__,
                          "seconds": round(time.perf_counter() - started, 1)}}
        stamp_path.write_text(json.dumps(stamp, indent=2) + "\n")
    else:
        log(f"reusing {zarr_path}")
    if parquet:
        if stamp.get("parquet", {}).get("params") != want or not parquet_path.is_file():
            log(f"writing {parquet_path} with DataFusion (COPY through zarrow)")
            started = time.perf_counter()
            write_parquet(args.zarrow, zarr_path, parquet_path, args.chunk)
            stamp["parquet"] = {"params": want, "seconds": round(time.perf_counter() - started, 1)}
            stamp_path.write_text(json.dumps(stamp, indent=2) + "\n")
        else:
            log(f"reusing {parquet_path}")
    if parquet and args.control:
        raw = root / "label_raw.zarr"
        if stamp.get("label_raw", {}).get("params") != want or not raw.is_dir():
            log(f"writing {raw} (label without compression, for q1's control)")
            write_label_uncompressed(zarr_path, raw)
            stamp["label_raw"] = {"params": want}
            stamp_path.write_text(json.dumps(stamp, indent=2) + "\n")
        else:
            log(f"reusing {raw}")
    stamp["root"] = str(root)
    return stamp


# ---------------------------------------------------------------------------------------------
# processes


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def lit(path: Path) -> str:
    """A SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def run_checked(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {cmd}\n{p.stderr}")
    return p.stdout


# The timed processes are started by a small helper process, not by this one. On Linux a child's
# ru_maxrss starts at the high-water RSS of the address space it was spawned from (exec records
# the old mm's peak; vfork/posix_spawn share the parent's mm): spawned from here — after
# zarr-python has generated or read millions of strings — every process would "peak" at this
# process's peak. The helper is a bare `python -S` (~10 MiB), so a reported peak RSS above that
# floor is the process's own.
SPAWNER = r"""
import json, os, sys, time
for line in sys.stdin:
    job = json.loads(line)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    actions = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, job["out"], flags, 0o600),
               (os.POSIX_SPAWN_OPEN, 2, job["err"], flags, 0o600)]
    try:
        started = time.perf_counter()
        pid = os.posix_spawnp(job["cmd"][0], job["cmd"], os.environ, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        seconds = time.perf_counter() - started
        reply = {"seconds": seconds, "maxrss_kib": usage.ru_maxrss,
                 "exit": os.waitstatus_to_exitcode(status)}
    except OSError as e:
        reply = {"error": str(e)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"""


class Spawner:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-S", "-c", SPAWNER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.tmp = tempfile.TemporaryDirectory(prefix="sql_compare-")
        self.out, self.err = Path(self.tmp.name, "stdout"), Path(self.tmp.name, "stderr")
        # the floor under every peak RSS reported: a process that allocates nothing
        self.floor = self.run(["true"])[1]

    def run(self, cmd: list[str]) -> tuple[float, int, str]:
        """(wall seconds, peak RSS in bytes, stdout). Fails loudly on a non-zero exit."""
        job = {"cmd": cmd, "out": str(self.out), "err": str(self.err)}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit("the spawner process died")
        reply = json.loads(line)
        if "error" in reply:
            sys.exit(f"cannot start {cmd}: {reply['error']}")
        if reply["exit"] != 0:
            sys.exit(f"command failed ({reply['exit']}): {cmd}\n{self.err.read_text()}")
        return reply["seconds"], reply["maxrss_kib"] * 1024, self.out.read_text()  # KiB on Linux

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()
        self.tmp.cleanup()


SPAWN: Spawner | None = None


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """Run cmd as its own process: (wall seconds, peak RSS in bytes, stdout)."""
    global SPAWN
    if SPAWN is None:
        SPAWN = Spawner()
    return SPAWN.run(cmd)


def zarr_flags(args) -> list[str]:
    flags = []
    if args.zarr_string_type:
        flags += ["--string-type", args.zarr_string_type]
    for option in args.zarr_option:
        flags += ["--option", option]
    return flags


def sql_cmd(args, sql: str, fmt: str, source: Path) -> list[str]:
    sql = sql.replace("FROM t", f"FROM {lit(source)}")
    extra = zarr_flags(args) if fmt == "zarr" else []
    if fmt == "parquet" and args.parquet_string_type == "utf8":
        sql = "SET datafusion.execution.parquet.schema_force_view_types = false; " + sql
    return [str(args.zarrow), "sql", "--format", "csv", *extra, sql]


def canonical(csv: str) -> list[str]:
    """The result rows, sorted, without the header (whose names carry the table's location)."""
    return sorted(line for line in csv.splitlines()[1:] if line)


# ---------------------------------------------------------------------------------------------
# checks


def check_rows(args, sources: dict[str, Path], rows: int) -> None:
    for fmt, source in sources.items():
        _, _, out = timed(sql_cmd(args, "SELECT count(*) AS n FROM t", fmt, source))
        got = int(out.splitlines()[1])
        if got != rows:
            sys.exit(f"{fmt}: {got:,} rows, expected {rows:,}")
    # the zarr side counts without reading chunks and Parquet answers from its footer: compare
    # a statistic over every row as well
    q = "SELECT count(label), count(id), sum(n), count(score) FROM t"
    outs = {fmt: canonical(timed(sql_cmd(args, q, fmt, src))[2]) for fmt, src in sources.items()}
    if outs["zarr"] != outs["parquet"]:
        sys.exit(f"zarr and Parquet differ: {outs}")


def explain_checks(args, sources: dict[str, Path]) -> dict:
    """EXPLAIN every query on both sides: the scan reads exactly the query's columns and the
    plan is not answered from statistics. Returns the string types each side uses."""
    scan_re = {"zarr": re.compile(r"DataSourceExec:.*?projection=\[([^\]]*)\].*?file_type=zarr"),
               "parquet": re.compile(r"DataSourceExec:.*?projection=\[([^\]]*)\]")}
    for qid, _, sql, columns in QUERIES:
        for fmt, source in sources.items():
            _, _, plan = timed(sql_cmd(args, "EXPLAIN " + sql, fmt, source))
            if "PlaceholderRowExec" in plan:
                sys.exit(f"{qid} on {fmt} is answered from statistics:\n{plan}")
            scans = scan_re[fmt].findall(plan)
            if len(scans) != 1:
                sys.exit(f"{qid} on {fmt}: expected one scan in the plan:\n{plan}")
            read = {c.strip() for c in scans[0].split(",") if c.strip()}
            if read != columns:
                sys.exit(f"{qid} on {fmt} reads {sorted(read)}, expected {sorted(columns)}:\n{plan}")
    types = {}
    for fmt, source in sources.items():
        q = "SELECT arrow_typeof(label) AS label, arrow_typeof(id) AS id FROM t LIMIT 1"
        _, _, out = timed(sql_cmd(args, q, fmt, source))
        label, id_ = out.splitlines()[1].split(",")
        types[fmt] = label if label == id_ else f"{label} (label) / {id_} (id)"
    return types


def parquet_row_groups(args, parquet: Path) -> str:
    """Row groups in the file, from EXPLAIN ANALYZE's pruning metrics."""
    sql = f"EXPLAIN ANALYZE SELECT count(*) FROM {lit(parquet)} WHERE n >= 0"
    out = run_checked([str(args.zarrow), "sql", "--format", "csv", sql])
    m = re.search(r"row_groups_pruned_statistics=(\d+) total", out)
    return m.group(1) if m else "?"


# ---------------------------------------------------------------------------------------------
# measurements


def bench_queries(args, sources: dict[str, Path], queries=QUERIES) -> dict:
    results = {qid: {fmt: {"seconds": [], "rss": []} for fmt in sources} for qid, *_ in queries}
    expected: dict[str, list[str]] = {}
    for round_ in range(args.repeat + 1):
        warmup = round_ == 0
        log("warm-up round" if warmup else f"round {round_}/{args.repeat}")
        # alternate which side goes first, so neither always runs right after the other
        order = ["zarr", "parquet"] if round_ % 2 == 0 else ["parquet", "zarr"]
        for qid, _, sql, _ in queries:
            for fmt in order:
                seconds, rss, out = timed(sql_cmd(args, sql, fmt, sources[fmt]))
                got = canonical(out)
                if qid not in expected:
                    expected[qid] = got
                elif got != expected[qid]:
                    other = "zarr" if fmt == "parquet" else "parquet"
                    sys.exit(
                        f"RESULT MISMATCH on {qid} ({sql}): {fmt} differs from {other}/earlier run\n"
                        f"expected: {expected[qid][:10]}\n"
                        f"got:      {got[:10]}"
                    )
                if not warmup:
                    results[qid][fmt]["seconds"].append(seconds)
                    results[qid][fmt]["rss"].append(rss)
    for qid in results:
        results[qid]["result_lines"] = len(expected[qid])
        results[qid]["result_head"] = expected[qid][:3]
    return results


def bench_label_read(args, zarr_path: Path) -> dict:
    """zarr-python's full read of `label` into numpy (in this process) vs zarrow's into Arrow
    (in the `read_column` process, timed inside it the same way), plus zarrow's export of the
    column as a whole process."""
    label = zarr_path / "label"
    export = [str(args.zarrow), "export", str(label), *zarr_flags(args),
              "--format", "arrow-stream", "--output", "/dev/null"]
    export_col = export + ["--query", "SELECT label FROM t"]
    out = {"zarr_python": [], "zarrow_read": [], "zarrow_export": [],
           "zarrow_export_label_only": [], "zarrow_export_rss": []}
    # zarrow's reads in one process, like zarr-python's in this one: a warm-up, then the rounds
    read_cmd = [str(args.read_column), str(label), "--repeat", str(args.repeat + 1)]
    if args.zarr_string_type:
        read_cmd += ["--string-type", args.zarr_string_type]
    read = json.loads(run_checked(read_cmd))
    if read["rows"] != args.rows:
        sys.exit(f"read_column read {read['rows']:,} labels, expected {args.rows:,}")
    out["zarrow_read"] = read["seconds"][1:]
    for round_ in range(args.repeat + 1):
        started = time.perf_counter()
        values = zarr.open_array(store=str(label), mode="r")[:]
        zp = time.perf_counter() - started
        if len(values) != args.rows:
            sys.exit(f"zarr-python read {len(values):,} labels, expected {args.rows:,}")
        del values
        ze, rss, _ = timed(export)
        zc, _, _ = timed(export_col)
        if round_ > 0:
            out["zarr_python"].append(zp)
            out["zarrow_export"].append(ze)
            out["zarrow_export_label_only"].append(zc)
            out["zarrow_export_rss"].append(rss)
    return out


def bench_rss(args, zarr_path: Path) -> dict:
    sql = QUERIES[0][2]
    seconds, rss = [], []
    for round_ in range(args.repeat + 1):
        s, r, _ = timed(sql_cmd(args, sql, "zarr", zarr_path))
        if round_ > 0:
            seconds.append(s)
            rss.append(r)
    return {"seconds": seconds, "rss": rss}


# ---------------------------------------------------------------------------------------------
# report


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def table(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join(" --- " if i == 0 else " ---: " for i in range(len(headers))) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


def report(args, facts: dict, results: dict, label: dict, rss_big: dict | None,
           control: dict | None) -> tuple[str, list[str]]:
    misses = []
    headers = ["query", "zarrow (zarr) s", "DataFusion (Parquet) s", "zarr/Parquet",
               "zarr peak RSS", "Parquet peak RSS"]
    rows = []
    for qid, desc, _, _ in QUERIES:
        z, p = results[qid]["zarr"], results[qid]["parquet"]
        ratio = med(z["seconds"]) / med(p["seconds"])
        results[qid]["ratio"] = ratio
        mark = "" if ratio <= 1.0 else (" (>1.0)" if ratio <= 1.25 else " MISS")
        if ratio > 1.25:
            misses.append(f"{qid} zarr/Parquet {ratio:.2f} > 1.25")
        rows.append([
            f"{qid} {desc}",
            f"{med(z['seconds']):.3f} (min {min(z['seconds']):.3f})",
            f"{med(p['seconds']):.3f} (min {min(p['seconds']):.3f})",
            f"{ratio:.2f}{mark}",
            mib(max(z["rss"])),
            mib(max(p["rss"])),
        ])
    out = []
    out.append(f"{args.rows:,} rows, {args.chunk:,}-row chunks / row groups, zstd({ZSTD_LEVEL}); "
               f"median of {args.repeat} runs after 1 warm-up, each query its own process; "
               f"zarr strings as {facts['string_types']['zarr']}, Parquet strings as "
               f"{facts['string_types']['parquet']}")
    out.append("")
    out.append(table(headers, rows, args.markdown))
    out.append("")
    if control:
        z, p = control["zarr"]["seconds"], control["parquet"]["seconds"]
        out.append(
            f"q1 control, label stored without compression on the zarr side: zarrow {med(z):.3f} s "
            f"(min {min(z):.3f}), Parquet {med(p):.3f} s (min {min(p):.3f}) -> "
            f"{med(z) / med(p):.2f} (q1 above: "
            f"{results['q1']['ratio']:.2f}; the difference is zstd decompression)"
        )
        out.append("")
    zp, zr, ze, zc = (med(label[k]) for k in
                      ("zarr_python", "zarrow_read", "zarrow_export", "zarrow_export_label_only"))
    speedup = zp / zr
    label["speedup"] = speedup
    if speedup < 20:
        misses.append(f"zarr-python/zarrow on label {speedup:.1f}x < 20x")
    out.append(
        f"label column, full read in process: zarr-python {zarr.__version__} "
        f"open_array(...)[:] {zp:.3f} s (min {min(label['zarr_python']):.3f}); zarrow "
        f"read through the scan (read_column) {zr:.3f} s (min "
        f"{min(label['zarrow_read']):.3f}) -> zarr-python is {speedup:.1f}x slower"
        f"{'' if speedup >= 20 else ' MISS (target >= 20x)'}"
    )
    out.append(
        f"  as a whole process: zarrow export --format arrow-stream {ze:.3f} s (min "
        f"{min(label['zarrow_export']):.3f}, peak RSS {mib(max(label['zarrow_export_rss']))}; "
        f"zarr-python / export {zp / ze:.1f}x); with --query 'SELECT label FROM t', without "
        f"the row index column: {zc:.3f} s"
    )
    gb = max(results["q1"]["zarr"]["rss"])
    rss_line = f"GROUP BY peak RSS (zarr): {mib(gb)} at {args.rows:,} rows"
    if gb >= GIB:
        misses.append(f"GROUP BY peak RSS {mib(gb)} >= 1 GiB at {args.rows:,} rows")
    if rss_big:
        big = max(rss_big["rss"])
        rss_line += (f"; {mib(big)} at {args.rss_rows:,} rows "
                     f"({med(rss_big['seconds']):.3f} s median)")
        if big >= GIB:
            misses.append(f"GROUP BY peak RSS {mib(big)} >= 1 GiB at {args.rss_rows:,} rows")
    out.append(rss_line + f" (target < 1 GiB; peak RSS via wait4, floor {mib(facts['rss_floor'])})")
    out.append("")
    d = facts["data"]
    out.append(
        f"data: label {d['distinct_labels']} distinct, {d['label_avg_bytes']} B avg; id "
        f"{d['id_avg_bytes']} B avg, {d['id_zz_rows']:,} rows contain 'zz'; on disk: zarr "
        f"{mib(facts['zarr_bytes'])} ({facts['zarr_files']} files), Parquet "
        f"{mib(facts['parquet_bytes'])} ({facts['parquet_row_groups']} row groups)"
    )
    m = facts["machine"]
    out.append(f"machine: {m['cpu']}, {m['nproc']} CPUs, {m['mem']}; {m['os']}; zarrow "
               f"{m['zarrow']} ({args.zarrow}), git {m['git']}")
    out.append("")
    out.append("targets: " + ("all met" if not misses else "MISSED: " + "; ".join(misses)))
    return "\n".join(out), misses


def machine_facts(args) -> dict:
    return {
        **run_stamp(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "zarr_python": zarr.__version__,
        "zarrow": run_checked([str(args.zarrow), "--version"]).strip(),
    }


def warn_if_stale(binary: Path) -> None:
    """A binary older than the sources is probably not what you meant to measure."""
    newest = max((p.stat().st_mtime for p in (REPO / "crates").rglob("*.rs")), default=0)
    if binary.stat().st_mtime < newest:
        log(f"warning: {binary} is older than the newest source file under crates/ — rebuild it?")


# ---------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows (default 10M)")
    ap.add_argument("--chunk", type=int, default=1_000_000,
                    help="rows per zarr chunk and per Parquet row group (default 1M)")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds after the warm-up (default 5)")
    ap.add_argument("--read-column", type=Path, default=REPO / "target/release/read_column",
                    help="zarrow's in-process column reader (cargo build --release -p "
                         "zarrow-benches --bin read_column)")
    ap.add_argument("--zarrow", type=Path, default=REPO / "target/release/zarrow",
                    help="the zarrow binary (default target/release/zarrow)")
    ap.add_argument("--data-dir", type=Path, default=REPO / "target/bench-data",
                    help="where the data sets and results go (default target/bench-data)")
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--rss-rows", type=int, default=None,
                    help="also generate this many rows (zarr only) and report the GROUP BY's peak RSS")
    ap.add_argument("--zarr-string-type", choices=["utf8", "large_utf8", "view"], default=None,
                    help="zarr side: zarrow's --string-type (default: zarrow's default, utf8); "
                         "Parquet strings are Utf8View in DataFusion 55")
    ap.add_argument("--parquet-string-type", choices=["view", "utf8"], default="view",
                    help="Parquet side: 'utf8' sets datafusion.execution.parquet."
                         "schema_force_view_types = false (default: DataFusion's, Utf8View)")
    ap.add_argument("--zarr-option", action="append", default=[], metavar="KEY=VALUE",
                    help="zarr side: a zarrow --option (e.g. concurrency=8); repeatable")
    ap.add_argument("--no-control", dest="control", action="store_false",
                    help="skip q1's control (label stored without compression on the zarr side)")
    ap.add_argument("--strict", action="store_true", help="exit 2 when a target is missed")
    args = ap.parse_args()
    if args.rows <= 0 or args.chunk <= 0 or args.repeat <= 0:
        ap.error("--rows, --chunk and --repeat must be positive")
    args.zarrow = args.zarrow.resolve()
    args.data_dir = args.data_dir.resolve()
    if not args.zarrow.is_file():
        ap.error(f"no zarrow binary at {args.zarrow} (cargo build --release -p zarrow-cli)")
    args.read_column = args.read_column.resolve()
    if not args.read_column.is_file():
        ap.error(f"no read_column binary at {args.read_column} "
                 "(cargo build --release -p zarrow-benches --bin read_column)")
    warn_if_stale(args.zarrow)
    warn_if_stale(args.read_column)
    global SPAWN
    SPAWN = Spawner()

    stamp = ensure_data(args, args.rows, parquet=True)
    root = Path(stamp["root"])
    sources = {"zarr": root / "bench.zarr", "parquet": root / "bench.parquet"}
    log("checking row counts and plans")
    check_rows(args, sources, args.rows)
    string_types = explain_checks(args, sources)
    facts = {
        "data": stamp["zarr"]["facts"],
        "string_types": string_types,
        "zarr_bytes": du(sources["zarr"]),
        "zarr_files": sum(1 for p in sources["zarr"].rglob("*") if p.is_file()),
        "parquet_bytes": du(sources["parquet"]),
        "parquet_row_groups": parquet_row_groups(args, sources["parquet"]),
        "machine": machine_facts(args),
        "rss_floor": SPAWN.floor,
    }

    results = bench_queries(args, sources)
    log("zarr-python vs zarrow on the label column")
    label = bench_label_read(args, sources["zarr"])
    rss_big = None
    if args.rss_rows:
        big = ensure_data(args, args.rss_rows, parquet=False)
        log(f"GROUP BY peak RSS at {args.rss_rows:,} rows")
        rss_big = bench_rss(args, Path(big["root"]) / "bench.zarr")

    control = None
    if args.control:
        log("q1 control: label without compression vs Parquet")
        raw = {"zarr": root / "label_raw.zarr", "parquet": sources["parquet"]}
        control = bench_queries(args, raw, QUERIES[:1])["q1"]
    text, misses = report(args, facts, results, label, rss_big, control)
    print(text)
    out = args.data_dir / "sql_compare_results.json"
    out.write_text(json.dumps({
        "stamp": facts["machine"],
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "queries": {qid: {"description": desc, "sql": sql} for qid, desc, sql, _ in QUERIES},
        "facts": facts,
        "results": results,
        "label_read": label,
        "rss_rows": rss_big,
        "q1_control": control,
        "misses": misses,
    }, indent=2) + "\n")
    log(f"results: {out}")
    SPAWN.close()
    if args.strict and misses:
        sys.exit(2)


if __name__ == "__main__":
    main()
