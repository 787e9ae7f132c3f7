#!/usr/bin/env bash
# The whole test suite, as the README gives it: creates the zarr-python venvs (round trips of what
# zarrow writes) and starts the loopback HTTP and S3 servers (remote-store tests), runs every test
# of the workspace with them, then the examples. Needs python3 with venv and PyPI on first run.
# With CI=true a test whose venv or server is missing fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

step "zarr-python venvs for the round-trip tests"
bash tests/fixtures/setup_venvs.sh

step "loopback HTTP and S3 (moto) servers"
eval "$(bash tests/remote/start.sh)"
trap 'bash tests/remote/stop.sh' EXIT

step "cargo test --workspace"
cargo test --workspace

step "core without optional features"
cargo test -p zarrow --lib

step "examples"
for ex in examples/examples/*.rs; do
    cargo run -q -p zarrow-examples --example "$(basename "$ex" .rs)"
done
