#!/usr/bin/env python3
"""zarrow over a remote store with latency, against DataFusion on Parquet and zarr-python.

A static HTTP server (nginx from the system's packages; the tests' Python server if nginx is
missing, which the result file then says) serves sql_compare.py's benchmark data; a delay proxy
(`benches/src/bin/delay_proxy.rs`: every segment forwarded half a round trip later in each
direction, a handshake's round trip per connection) puts 0, 20 or 80 ms of RTT between it and
the clients. Run from the repository root, after release builds of the CLI and the proxy:

    cargo build --release -p zarrow-cli -p zarrow-benches --bin zarrow --bin delay_proxy
    .venv-zarr3/bin/python benches/remote_compare.py               # 10M rows; 10 and 100 chunks

Per RTT and layout it times, each as its own process, median of `--repeat` after a warm-up,
the RTTs interleaved (each round runs every RTT's process once, so a machine that speeds up or
slows down during the run moves them alike and their ratios hold):
- zarrow `sql` over `http://…/bench.zarr`: q1 (GROUP BY label) and q2 (id LIKE), at the
  defaults and tuned (`--tuned`: more read-ahead and partitions);
- zarrow `sql` in a session: the table registered once, then q1 or q2 three times in one
  process, each statement's own time from `--verbose` (the first run, and the third, whose
  connections are pooled: what a shell, notebook or application sees after its first query);
- zarrow `export` of the `label` column whole (Arrow IPC to /dev/null), defaults and tuned;
- DataFusion on the Parquet twin over the same server (zarrow's CLI, `FROM 'http://…parquet'`),
  at each `target_partitions` of `--parquet-partitions`, keeping the best;
- `range_split_bytes` swept on the smallest layout (q2 and the `label` read), `concurrency` and
  `warm_connections` (q1 and the `label` read) on the largest;
- zarr-python 3 reading `label` whole, with fsspec (aiohttp) and with obstore, in a venv of the
  harness's own (`target/venv-bench-remote`, made on first use from requirements-remote.txt).
It counts the requests and bytes each run cost from nginx's access log, checks the answers agree,
and writes `<data-dir>/remote_compare_results.json` (copy it into benches/results/ to publish;
benches/report.py renders it with the targets checked).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sql_compare as sc  # noqa: E402  (the data generator, the process timer, the stamp)

REPO = sc.REPO
VENV = REPO / "target/venv-bench-remote"
REQUIREMENTS = REPO / "benches/requirements-remote.txt"

# Targets for reads over high-latency object stores, at 100 chunks and zarrow's defaults.
AT_20_VS_0_MAX = 1.15      # zarrow at 20 ms / zarrow at 0 ms
AT_80_VS_0_MAX = 1.5       # zarrow at 80 ms / zarrow at 0 ms
ZARR_PYTHON_MIN = 10.0     # zarr-python / zarrow, the column read whole, at 20 ms

QUERIES = [q for q in sc.QUERIES if q[0] in ("q1", "q2")]

# zarr-python reading one array whole over HTTP; prints the element count and the last value.
ZARR_PYTHON = r"""
import sys, warnings
warnings.simplefilter("ignore")
import zarr
url, how = sys.argv[1], sys.argv[2]
if how == "fsspec":
    a = zarr.open_array(url, mode="r")
else:
    from obstore.store import HTTPStore
    from zarr.storage import ObjectStore
    base, _, path = url.rpartition("/")
    a = zarr.open_array(ObjectStore(HTTPStore.from_url(base, client_options={"allow_http": True}), read_only=True), path=path, mode="r")
v = a[:]
print(len(v), v[-1])
"""


def log(msg: str) -> None:
    sc.log(msg)


def wait_file(path: Path, proc: subprocess.Popen, what: str) -> str:
    for _ in range(200):
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        if proc.poll() is not None:
            sys.exit(f"{what} exited ({proc.returncode}) before it was ready")
        time.sleep(0.05)
    sys.exit(f"{what} did not start")


class Server:
    """nginx (or the tests' Python server) on loopback over `root`, with a request log."""

    def __init__(self, root: Path, state: Path, force_python: bool) -> None:
        self.state = state
        self.log_path = state / "access.log"
        self.log_path.write_text("")
        nginx = shutil.which("nginx") or (Path("/usr/sbin/nginx") if Path("/usr/sbin/nginx").exists() else None)
        if nginx and not force_python:
            port = free_port()
            conf = state / "nginx.conf"
            conf.write_text(f"""
worker_processes 2;
daemon off;
pid {state}/nginx.pid;
error_log {state}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    log_format bench '$request_method $uri $status $bytes_sent';
    client_body_temp_path {state}/body;
    proxy_temp_path {state}/proxy;
    fastcgi_temp_path {state}/fastcgi;
    uwsgi_temp_path {state}/uwsgi;
    scgi_temp_path {state}/scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        access_log {self.log_path} bench;
        location / {{ autoindex off; }}
    }}
}}
""")
            self.proc = subprocess.Popen([str(nginx), "-p", str(state), "-c", str(conf)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.kind = "nginx " + subprocess.run([str(nginx), "-v"], capture_output=True,
                                                  text=True).stderr.strip().split("/")[-1]
            self.port = port
            for _ in range(100):
                try:
                    import urllib.request
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
                except Exception as e:  # 403/404 mean it answers
                    if getattr(e, "code", None):
                        break
                    time.sleep(0.05)
                    continue
                break
        else:
            port_file = state / "http.port"
            port_file.unlink(missing_ok=True)
            self.proc = subprocess.Popen([sys.executable, str(REPO / "tests/remote/http_server.py"),
                                          str(root), str(port_file)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.port = int(wait_file(port_file, self.proc, "the Python HTTP server"))
            self.kind = "python http_server.py (no request log)"
            self.log_path = None

    def mark(self) -> int:
        return self.log_path.stat().st_size if self.log_path else 0

    def since(self, mark: int) -> tuple[int | None, int | None]:
        """(requests, bytes sent) logged after `mark`."""
        if not self.log_path:
            return None, None
        with open(self.log_path) as f:
            f.seek(mark)
            lines = [l.split() for l in f if l.strip()]
        return len(lines), sum(int(l[3]) for l in lines if len(l) >= 4 and l[3].isdigit())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()


class Proxy:
    def __init__(self, binary: Path, upstream_port: int, rtt_ms: float, state: Path) -> None:
        port_file = state / f"proxy-{rtt_ms}.port"
        port_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen([str(binary), str(port_file), f"127.0.0.1:{upstream_port}",
                                      str(rtt_ms)])
        self.port = int(wait_file(port_file, self.proc, "delay_proxy"))

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def free_port() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ensure_venv() -> Path:
    """A venv with zarr-python 3, fsspec/aiohttp and obstore; rebuilt when the pins change."""
    python = VENV / "bin/python"
    want = REQUIREMENTS.read_text()
    stamp = VENV / ".requirements"
    if not (python.is_file() and stamp.is_file() and stamp.read_text() == want):
        log(f"creating {VENV} from {REQUIREMENTS.name}")
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-r", str(REQUIREMENTS)], check=True)
        stamp.write_text(want)
    return python


def run(server: Server, cmd: list[str]) -> dict:
    mark = server.mark()
    seconds, rss, out = sc.timed(cmd)
    time.sleep(0.05)  # nginx writes its log line after the response
    requests, sent = server.since(mark)
    return {"seconds": seconds, "rss": rss, "requests": requests, "bytes": sent, "out": out}


def interleaved(cmds: dict[str, list[str]], repeat: int, runner) -> dict[str, list]:
    """Each RTT's command (`cmds`: RTT → command) run by `runner`: a warm-up each (connections,
    the page cache, nginx's open-file cache), then `repeat` rounds that run every RTT's command
    once, in turn. Interleaved, a machine that speeds up or slows down during the run moves
    every RTT's figures alike, so their ratios (the targets) hold. RTT → the rounds' results."""
    for cmd in cmds.values():
        runner(cmd)
    runs: dict[str, list] = {rtt: [] for rtt in cmds}
    for _ in range(repeat):
        for rtt, cmd in cmds.items():
            runs[rtt].append(runner(cmd))
    return runs


def measure(server: Server, cmds: dict[str, list[str]], repeat: int,
            rows: int | None = None) -> dict[str, dict]:
    """Each RTT's command timed as its own process, the RTTs interleaved (`interleaved`). One
    RTT's runs must agree; with `rows`, the output is zarr-python's "<count> <last>" and the
    count must be `rows`."""
    out = {}
    for rtt, rs in interleaved(cmds, repeat, lambda cmd: run(server, cmd)).items():
        cmd = cmds[rtt]
        if rows is not None:
            counts = {r["out"].split()[0] for r in rs}
            if counts != {str(rows)}:
                sys.exit(f"{cmd}: read {counts} elements, expected {rows}")
        outs = {tuple(sc.canonical(r["out"])) for r in rs}
        if len(outs) != 1:
            sys.exit(f"{cmd}: the runs disagree")
        out[rtt] = {
            "seconds": [r["seconds"] for r in rs],
            "rss": [r["rss"] for r in rs],
            "requests": rs[-1]["requests"],
            "bytes": rs[-1]["bytes"],
            "answer": list(outs.pop()),
        }
    return out


def session_run(cmd: list[str]) -> tuple[list[float], tuple]:
    """One session process: each statement's `elapsed` and the answer."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{cmd}: {done.stderr[-2000:]}")
    elapsed = [float(line.split()[1]) for line in done.stderr.splitlines()
               if line.startswith("elapsed ")]
    if len(elapsed) != 4:
        sys.exit(f"{cmd}: expected 4 'elapsed' lines on stderr, got {done.stderr[-2000:]}")
    return elapsed, tuple(sc.canonical(done.stdout))


def measure_session(args, zarr_urls: dict[str, str], sql: str, repeat: int) -> dict[str, dict]:
    """`sql` in a session, as the shell, a notebook or an application runs it: the table
    registered once (CREATE EXTERNAL TABLE), then the query three times in one process. Each
    statement's own wall time comes from `--verbose` (`elapsed`): `first` is the first run of
    the query (the table open, its chunks on new connections), `seconds` the third (connections
    pooled). One process per RTT and round, interleaved (`interleaved`)."""
    cmds = {}
    for rtt, url in zarr_urls.items():
        statements = f"CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{url}'; {sql}; {sql}; {sql}"
        cmds[rtt] = [str(args.zarrow), "sql", "--verbose", "--format", "csv", statements]
    out = {}
    for rtt, rs in interleaved(cmds, repeat, session_run).items():
        if len({answer for _, answer in rs}) != 1:
            sys.exit(f"{cmds[rtt]}: the runs disagree")
        out[rtt] = {"first": [elapsed[1] for elapsed, _ in rs],
                    "seconds": [elapsed[3] for elapsed, _ in rs]}
    return out


def zarrow_sql(args, sql: str, tuned: bool) -> list[str]:
    cmd = [str(args.zarrow), "sql", "--format", "csv"]
    if tuned:
        cmd += ["--option", f"concurrency={args.tuned_concurrency}"]
        sql = f"SET datafusion.execution.target_partitions = {args.tuned_partitions}; {sql}"
    return cmd + [sql]


def bench_layout(args, server: Server, ports: dict[str, int], rel: str,
                 py: Path | None) -> dict[str, dict]:
    """Every measurement of one layout at every RTT (`ports`: RTT → its proxy's port), the RTTs
    interleaved (see `measure`); RTT → results."""
    zarr = {rtt: f"http://127.0.0.1:{port}/{rel}/bench.zarr" for rtt, port in ports.items()}
    parquet = {rtt: f"http://127.0.0.1:{port}/{rel}/bench.parquet" for rtt, port in ports.items()}
    out = {rtt: {"zarrow": {}, "zarrow_tuned": {}, "zarrow_session": {}, "parquet": {},
                 "zarr_python": {}} for rtt in ports}

    def place(path: tuple, got: dict[str, dict]) -> None:
        for rtt, m in got.items():
            node = out[rtt]
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = m

    def query(sql: str, url: str) -> str:
        return sql.replace("FROM t", f"FROM '{url}'")

    def task(name: str, rtt: str, extra: list[str]) -> list[str]:
        """q1, q2 or the `label` read at the defaults, with `extra` options."""
        if name == "label":
            return [str(args.zarrow), "export", f"{zarr[rtt]}/label", "--format", "arrow-stream",
                    "--output", "/dev/null"] + extra
        sql = next(q[2] for q in QUERIES if q[0] == name)
        return [str(args.zarrow), "sql", "--format", "csv"] + extra + [query(sql, zarr[rtt])]

    for qid, _, sql, _ in QUERIES:
        for key, tuned in (("zarrow", False), ("zarrow_tuned", True)):
            place((key, qid), measure(server, {rtt: zarrow_sql(args, query(sql, zarr[rtt]), tuned)
                                               for rtt in ports}, args.repeat))
        place(("zarrow_session", qid), measure_session(args, zarr, sql, args.repeat))
        best: dict[str, dict] = {}
        for partitions in args.parquet_partitions:
            q = f"SET datafusion.execution.target_partitions = {partitions}; {sql}"
            got = measure(server, {rtt: [str(args.zarrow), "sql", "--format", "csv", query(q, parquet[rtt])]
                                   for rtt in ports}, args.repeat)
            for rtt, m in got.items():
                m["target_partitions"] = partitions
                if rtt not in best or med(m["seconds"]) < med(best[rtt]["seconds"]):
                    best[rtt] = m
        place(("parquet", qid), best)
        for rtt in ports:
            if best[rtt]["answer"] != out[rtt]["zarrow"][qid]["answer"]:
                sys.exit(f"{qid}: zarr and Parquet answers differ over {zarr[rtt]}")
    # Options swept, each value at every RTT, the session's other settings at their defaults:
    # - `concurrency`, the default chosen by these figures (q1 and the column read);
    # - `range_split_bytes` on the smallest layout: q2 reads `id`, the largest chunks (about
    #   15 MB each in 10 chunks), and `label` read whole; 0 is one GET a chunk;
    # - `warm_connections`: what a fresh process (each run here is one) pays before its first
    #   chunks.
    sweeps = [("sweep", "concurrency", args.sweep, ("q1", "label"), args.sweep_layout),
              ("split_sweep", "range_split_bytes", args.split_sweep, ("q2", "label"), args.split_layout),
              ("warm_sweep", "warm_connections", args.warm_sweep, ("q1", "label"), args.sweep_layout)]
    for key, option, values, tasks, layout in sweeps:
        if not values or rel != layout:
            continue
        for value in values:
            extra = ["--option", f"{option}={value}"]
            for name in tasks:
                place((key, str(value), name),
                      measure(server, {rtt: task(name, rtt, extra) for rtt in ports}, args.repeat))
    for key, extra in (("zarrow", []), ("zarrow_tuned", ["--option", f"concurrency={args.tuned_concurrency}"])):
        place((key, "label"), measure(server, {rtt: task("label", rtt, extra) for rtt in ports}, args.repeat))
    if py:
        for how in ("fsspec", "obstore"):
            cmds = {rtt: [str(py), "-c", ZARR_PYTHON, f"{zarr[rtt]}/label", how] for rtt in ports}
            try:
                place(("zarr_python", how), measure(server, cmds, args.zarr_python_repeat, args.rows))
            except SystemExit as e:
                log(f"zarr-python with {how}: {e}")
                place(("zarr_python", how), {rtt: {"error": str(e)[:500]} for rtt in ports})
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def checks(results: dict) -> list[dict]:
    """The targets, on this run's figures (100-chunk layout, zarrow's defaults)."""
    out = []
    layout = results.get("100")
    if not layout:
        return out
    for rtt, limit in (("20", AT_20_VS_0_MAX), ("80", AT_80_VS_0_MAX)):
        if rtt not in layout or "0" not in layout:
            continue
        for task in ("q1", "q2", "label"):
            r = med(layout[rtt]["zarrow"][task]["seconds"]) / med(layout["0"]["zarrow"][task]["seconds"])
            out.append({"target": f"{task} at {rtt} ms ≤ {limit}× its 0 ms time", "value": f"{r:.2f}×",
                        "ok": r <= limit})
        for task in ("q1", "q2"):
            session = [layout[x].get("zarrow_session", {}).get(task) for x in (rtt, "0")]
            if all(session):
                r = med(session[0]["seconds"]) / med(session[1]["seconds"])
                out.append({"target": f"{task} in a session at {rtt} ms ≤ {limit}× its 0 ms time",
                            "value": f"{r:.2f}×", "ok": r <= limit})
    if "20" in layout:
        at20 = layout["20"]
        for task in ("q1", "q2"):
            z, p = med(at20["zarrow"][task]["seconds"]), med(at20["parquet"][task]["seconds"])
            out.append({"target": f"{task} at 20 ms ≤ DataFusion on Parquet (best target_partitions "
                                  f"{at20['parquet'][task]['target_partitions']})",
                        "value": f"{z / p:.2f}×", "ok": z <= p})
        zl = med(at20["zarrow"]["label"]["seconds"])
        for how, m in at20["zarr_python"].items():
            if "seconds" in m:
                r = med(m["seconds"]) / zl
                out.append({"target": f"zarr-python ({how}) ≥ {ZARR_PYTHON_MIN:.0f}× zarrow, label at 20 ms",
                            "value": f"{r:.1f}×", "ok": r >= ZARR_PYTHON_MIN})
    return out


def print_table(results: dict) -> None:
    for layout, by_rtt in results.items():
        print(f"\n{layout} chunks")
        print(f"{'rtt':>4} {'task':6} {'zarrow':>8} {'tuned':>8} {'parquet':>8} {'fsspec':>8} {'obstore':>8}  requests")
        for rtt, r in by_rtt.items():
            for task in ("q1", "q2", "label"):
                cells = [med(r["zarrow"][task]["seconds"]), med(r["zarrow_tuned"][task]["seconds"])]
                p = r["parquet"].get(task)
                zp = [r["zarr_python"].get(h, {}) for h in ("fsspec", "obstore")] if task == "label" else [{}, {}]
                row = [f"{c:8.3f}" for c in cells]
                row.append(f"{med(p['seconds']):8.3f}" if p else f"{'-':>8}")
                row += [f"{med(z['seconds']):8.3f}" if "seconds" in z else f"{'-':>8}" for z in zp]
                print(f"{rtt:>4} {task:6} {' '.join(row)}  {r['zarrow'][task]['requests']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--chunks", type=int, nargs="+", default=[10, 100],
                    help="layouts, as chunks per column (default 10 and 100)")
    ap.add_argument("--rtt", type=float, nargs="+", default=[0, 20, 80], help="round trips in ms")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--zarr-python-repeat", type=int, default=1)
    ap.add_argument("--parquet-partitions", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--tuned-concurrency", type=int, default=64)
    ap.add_argument("--tuned-partitions", type=int, default=8)
    ap.add_argument("--sweep", type=int, nargs="*", default=[4, 8, 16, 32, 64],
                    help="concurrency values timed on the largest layout (none: skip)")
    ap.add_argument("--split-sweep", type=int, nargs="*", default=[0, 2 << 20, 8 << 20, 32 << 20],
                    help="range_split_bytes values timed on the smallest layout (none: skip)")
    ap.add_argument("--warm-sweep", type=int, nargs="*", default=[0, 16, 32, 64],
                    help="warm_connections values timed on the largest layout (none: skip)")
    ap.add_argument("--zarrow", type=Path, default=REPO / "target/release/zarrow")
    ap.add_argument("--proxy", type=Path, default=REPO / "target/release/delay_proxy")
    ap.add_argument("--data-dir", type=Path, default=REPO / "target/bench-data")
    ap.add_argument("--no-zarr-python", action="store_true", help="skip zarr-python (and its venv)")
    ap.add_argument("--python-server", action="store_true", help="the tests' server, not nginx")
    ap.add_argument("--json", type=Path, default=None, help="results file (default in --data-dir)")
    args = ap.parse_args()
    for binary in (args.zarrow, args.proxy):
        if not binary.is_file():
            sys.exit(f"{binary} not found: cargo build --release -p zarrow-cli -p zarrow-benches "
                     "--bin zarrow --bin delay_proxy")
    sc.warn_if_stale(args.zarrow)
    args.control = False
    py = None if args.no_zarr_python else ensure_venv()
    state = Path(tempfile.mkdtemp(prefix="remote_compare-"))
    server = Server(args.data_dir.resolve(), state, args.python_server)
    log(f"server: {server.kind} on 127.0.0.1:{server.port}")
    results: dict = {}
    layouts = {}
    try:
        for chunks in args.chunks:
            args.chunk = -(-args.rows // chunks)
            stamp = sc.ensure_data(args, args.rows, parquet=True)
            layouts[str(chunks)] = {"chunk": args.chunk, "path": Path(stamp["root"]).name}
        args.sweep_layout = layouts[str(max(args.chunks))]["path"]
        args.split_layout = layouts[str(min(args.chunks))]["path"]
        for chunks, layout in layouts.items():
            proxies = {f"{rtt:g}": Proxy(args.proxy, server.port, rtt, state) for rtt in args.rtt}
            try:
                log(f"{chunks} chunks at {', '.join(proxies)} ms, interleaved")
                results[chunks] = bench_layout(args, server, {rtt: p.port for rtt, p in proxies.items()},
                                               layout["path"], py)
            finally:
                for proxy in proxies.values():
                    proxy.stop()
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)
    found = checks(results)
    data = {
        "stamp": {**sc.run_stamp(), "zarrow": sc.run_checked([str(args.zarrow), "--version"]).strip()},
        "rows": args.rows,
        "layouts": layouts,
        "server": server.kind,
        "proxy": "benches/src/bin/delay_proxy.rs (half the RTT each way per segment, one RTT per connection)",
        "repeat": args.repeat,
        "interleaved": True,
        "tuned": {"concurrency": args.tuned_concurrency, "target_partitions": args.tuned_partitions},
        "results": results,
        "checks": found,
    }
    for layout in results.values():  # answers are checked above; keep the file small
        for r in layout.values():
            for side in r.values():
                for m in side.values():
                    m.pop("answer", None)
                    for inner in m.values():
                        if isinstance(inner, dict):
                            inner.pop("answer", None)
    path = args.json or args.data_dir / "remote_compare_results.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    print_table(results)
    for c in found:
        print(f"{'met   ' if c['ok'] else 'MISSED'} {c['target']}: {c['value']}")
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
