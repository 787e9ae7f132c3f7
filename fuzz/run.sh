#!/usr/bin/env bash
# Run zarrow's fuzz targets for a fixed number of executions each.
#
#   bash fuzz/run.sh                 # every target, 10^7 executions each
#   RUNS=100000 bash fuzz/run.sh metadata
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Seeds come from the
# fixture stores (fuzz/seeds.py); a crash stops the run and leaves its input in
# fuzz/artifacts/<target>/ — turn it into a regression test (tests/it/bad_input.rs or the
# decoder's unit tests) before fixing it. -malloc_limit_mb makes any single allocation over
# 512 MiB a finding: no input of these sizes may make zarrow allocate by a number it holds.
set -euo pipefail
cd "$(dirname "$0")"
RUNS=${RUNS:-10000000}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(metadata decode_chunk open_store)
python3 seeds.py
cargo +nightly fuzz build -O --debug-assertions
mkdir -p logs
for t in "${TARGETS[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  echo "== $t: $RUNS executions"
  cargo +nightly fuzz run -O --debug-assertions "$t" "corpus/$t" -- \
    -runs="$RUNS" -rss_limit_mb=3072 -malloc_limit_mb=512 -timeout=10 \
    -max_len=65536 -print_final_stats=1 2>&1 | tee "logs/$t.log" | grep -E "^(Done|stat::|==|INFO: Seed)|ERROR|panicked" || true
  grep -q "^Done" "logs/$t.log" || { echo "$t: stopped early, see fuzz/logs/$t.log"; exit 1; }
done
