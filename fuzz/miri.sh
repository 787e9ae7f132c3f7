#!/usr/bin/env bash
# The chunk decoders' unit tests (and the scan's memory accounting) under Miri, which reports
# undefined behaviour: out-of-bounds reads, misaligned or dangling pointers, invalid values.
#
#   bash fuzz/miri.sh
#
# Needs the nightly toolchain with Miri (`rustup component add --toolchain nightly miri`).
# Twice: a debug build, where zarrow takes Arrow's checked constructors (as the tests compare
# against), and a release build, where it takes the unchecked ones behind `ValidOffsets` — the
# `unsafe` code whose soundness the validation must carry. Tests that call C (zstd, bzip2,
# blosc: Miri cannot run foreign code), that depend on malloc's alignment, or that are too large
# for Miri's interpreter are marked `cfg_attr(miri, ignore = "why")` and listed as ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
FILTERS=(decode:: scan::memory)
echo "== Miri, debug build"
cargo +nightly miri test -p zarrow --lib -- "${FILTERS[@]}"
echo "== Miri, release build (the unchecked Arrow constructors)"
cargo +nightly miri test -p zarrow --lib --release -- "${FILTERS[@]}"
