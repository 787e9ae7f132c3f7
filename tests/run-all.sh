#!/usr/bin/env bash
# The whole test suite, as the README gives it: creates the zarr-python venvs (round trips of what
# zarrow writes) and starts the loopback HTTP, S3, Azure and GCS servers (remote-store tests; Azurite
# comes from the npm registry, so npm is needed too), runs every test
# of the workspace with them (among them zarrow-ballista's loopback cluster: a zarrow-scheduler
# and two zarrow-executor processes queried over a local store and the S3 one), then the
# examples, the Python package (its wheel, installed in a fresh venv, under pytest) and a tiny run
# of the benchmark harness. Needs python3 with venv and PyPI on first run.
# With CI=true a test whose venv or tool is missing fails instead of skipping (the rule is
# zarrow_testkit::skip_unless_ci).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

step "zarr-python (and icechunk + xarray) venvs for the round-trip tests"
bash tests/fixtures/setup_venvs.sh

step "loopback HTTP, S3 (moto), Azure (Azurite) and GCS (fake-gcs-server) servers"
eval "$(bash tests/remote/start.sh)"
trap 'bash tests/remote/stop.sh' EXIT

step "cargo test --workspace (with the tests that need the loopback servers)"
# Those tests are #[ignore = "needs the loopback servers…"]: a plain `cargo test` lists them as
# ignored; here the servers run, so they are included (and a missing server fails them).
# The one other ignored test needs a release build and the 10M-row benchmark data: it is run by
# hand (docs/writing.md), never here.
cargo test --workspace -- --include-ignored --skip copy_10m_rows_under_a_200m_memory_limit_release
# CI's disk is limited: the icechunk read-back venv is used by those tests only.
if [[ "${CI:-}" == true ]]; then rm -rf .venv-icechunk-read; fi

step "core without optional features"
cargo test -p zarrow --lib

step "examples, and the binaries the benchmark harness runs"
# Built in one invocation with the tests, so with the same features as `cargo test --workspace`
# resolved them (dev-dependencies included): everything but the harness's binaries is already
# built. `cargo run -p zarrow-examples` would resolve the features of that one package and build
# DataFusion a second time.
cargo build -q --workspace --bins --tests --examples
for ex in examples/examples/*.rs; do
    "target/debug/examples/$(basename "$ex" .rs)"
done

step "Python package: the wheel built by maturin, installed in a fresh venv, pytest against it"
bash crates/zarrow-python/ci.sh

step "benchmark harness, tiny data (debug build; checks it runs and both sides agree)"
.venv-zarr3/bin/python benches/sql_compare.py --rows 300000 --chunk 100000 --repeat 1 \
    --zarrow target/debug/zarrow --read-column target/debug/read_column \
    --data-dir target/bench-data-smoke >/dev/null
# the remote harness: the same data over loopback HTTP behind the delay proxy at 0 and 20 ms
# (nginx if installed, else the tests' Python server), zarr-python with fsspec and obstore
.venv-zarr3/bin/python benches/remote_compare.py --rows 300000 --chunks 3 --rtt 0 20 --repeat 1 \
    --parquet-partitions 2 --sweep 8 --split-sweep 0 262144 --warm-sweep 0 8 --zarrow target/debug/zarrow --proxy target/debug/delay_proxy \
    --data-dir target/bench-data-smoke --json target/bench-data-smoke/remote_compare_results.json >/dev/null
# the join harness: an AnnData store of 600 × 60, join, semi-join and top-k with pruning at run
# time on and off (answers equal, chunk targets met), local only, nothing timed
.venv-zarr3/bin/python benches/join_compare.py --smoke --zarrow target/debug/zarrow \
    --data-dir target/bench-data-smoke >/dev/null
# the scaling harness: the table made and written by SQL, q1–q4 on zarr and Parquet (answers
# equal), nothing published
python3 benches/scan_scaling.py --rows 20000 --chunk-rows 10000 --partitions 2 --repeat 1 \
    --no-taskset --zarrow target/debug/zarrow --data-dir target/bench-data-smoke/scan_scaling \
    --json target/bench-data-smoke/scan_scaling_results.json >/dev/null
# the build-against-build harness on that data (one build against itself; its report renders)
python3 benches/ab_builds.py target/debug target/debug --data \
    target/bench-data-smoke/scan_scaling/r20000_c10000 --what rc,q2,q1p --runs 1 \
    --json target/bench-data-smoke/ab_builds_results.json >/dev/null
mkdir -p target/bench-data-smoke/ab-report
cp target/bench-data-smoke/ab_builds_results.json target/bench-data-smoke/ab-report/
python3 benches/report.py --results target/bench-data-smoke/ab-report \
    --out target/bench-data-smoke/ab-report/benchmarks.md >/dev/null
# the write harness: COPY … STORED AS ZARR against Parquet, xarray and zarr-python
.venv-zarr3/bin/python benches/write_compare.py --rows 300000 --chunk 100000 --repeat 1 \
    --zarrow target/debug/zarrow --data-dir target/bench-data-smoke >/dev/null
