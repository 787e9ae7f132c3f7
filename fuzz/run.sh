#!/usr/bin/env bash
# Run zarrow's fuzz targets for a fixed number of executions each.
#
#   bash fuzz/run.sh                              # every target, 10^7 executions each
#   RUNS=100000 bash fuzz/run.sh metadata
#   RUNS=1000000 SANITIZER=address bash fuzz/run.sh
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Seeds come from the
# fixture stores (fuzz/seeds.py); a crash stops the run and leaves its input in
# fuzz/artifacts/<target>/ — turn it into a regression test (tests/it/bad_input.rs or the
# decoder's unit tests) before fixing it.
#
# SANITIZER=none (the default) runs 5-7x faster, which is what makes 10^7 executions a target
# affordable on two cores; the targets build zarrow with `force_validate`, so every array is
# checked in full by Arrow either way. SANITIZER=address adds AddressSanitizer (out-of-bounds
# reads in unsafe code) and makes -malloc_limit_mb count: any single allocation over 512 MiB is a
# finding — no input of these sizes may make zarrow allocate by a number it holds.
set -euo pipefail
cd "$(dirname "$0")"
RUNS=${RUNS:-10000000}
SANITIZER=${SANITIZER:-none}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(metadata decode_chunk open_store icechunk)
python3 seeds.py
cargo +nightly fuzz build -O --debug-assertions -s "$SANITIZER"
mkdir -p logs
for t in "${TARGETS[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  echo "== $t: $RUNS executions, sanitizer $SANITIZER"
  log="logs/$t-$SANITIZER.log"
  cargo +nightly fuzz run -O --debug-assertions -s "$SANITIZER" "$t" "corpus/$t" -- \
    -runs="$RUNS" -rss_limit_mb=3072 -malloc_limit_mb=512 -timeout=10 \
    -max_len=65536 -print_final_stats=1 >"$log" 2>&1 || true
  grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss)|ERROR|panicked" "$log" || true
  grep -q "^Done" "$log" || { echo "$t: stopped early, see fuzz/$log"; exit 1; }
done
