#!/usr/bin/env bash
# The Python package as a user gets it: build the wheel with maturin (debug profile, the
# workspace's target dir, so DataFusion's build is the one `cargo test` made: the "Build reuse"
# list in Cargo.toml, checked by tests/feature_unification.py), install it into
# a fresh venv with the test requirements, run pytest against the installed wheel.
#   bash crates/zarrow-python/ci.sh            (from tests/run-all.sh, servers started)
# Env: PYTHON (default python3), ZARROW_CLI (the Rust CLI the answers are compared with),
# ZARROW_WHEELS / ZARROW_TEST_VENV (where the wheel and the test venv go; default under target/).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
BUILD_VENV="$ROOT/.venv-maturin"
TEST_VENV="${ZARROW_TEST_VENV:-$ROOT/target/venv-zarrow-wheel}"
WHEELS="${ZARROW_WHEELS:-$ROOT/target/wheels}"

# maturin itself, once (a stamp of its pin).
MATURIN_PIN="maturin==1.16.0"
if [[ ! -x "$BUILD_VENV/bin/maturin" || "$(cat "$BUILD_VENV/.stamp" 2>/dev/null)" != "$MATURIN_PIN" ]]; then
    rm -rf "$BUILD_VENV"
    "$PYTHON" -m venv "$BUILD_VENV"
    "$BUILD_VENV/bin/pip" install --quiet --disable-pip-version-check "$MATURIN_PIN"
    echo "$MATURIN_PIN" >"$BUILD_VENV/.stamp"
fi

rm -rf "$WHEELS"
# No --compatibility: maturin tags the wheel with the oldest manylinux policy its symbols allow
# (manylinux_2_34 on this glibc), and --auditwheel check fails the build if the wheel does not
# comply with the tag it claims (external libraries, newer symbols).
(cd "$ROOT" && "$BUILD_VENV/bin/maturin" build --manifest-path crates/zarrow-python/Cargo.toml \
    --profile dev --out "$WHEELS" --interpreter "$(command -v "$PYTHON")" --auditwheel check)
WHEEL="$(ls "$WHEELS"/zarrow-*.whl)"
echo "ci.sh: built $(basename "$WHEEL")"

# A fresh venv: the test requirements and the wheel, nothing of the source tree.
rm -rf "$TEST_VENV"
"$PYTHON" -m venv "$TEST_VENV"
"$TEST_VENV/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/requirements-test.txt"
"$TEST_VENV/bin/pip" install --quiet --disable-pip-version-check "$WHEEL"

export ZARROW_CLI="${ZARROW_CLI:-$ROOT/target/debug/zarrow}"
# The README's Python example, as a user runs it from the repository's root (the installed
# wheel: the package's source is not on the path there).
(cd "$ROOT" && "$TEST_VENV/bin/python" - <<'PY'
import pathlib, re
readme = pathlib.Path("README.md").read_text()
section = readme[readme.index("## Python"):]
example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
print("ci.sh: running the README's Python example")
exec(compile(example, "README.md (Python example)", "exec"), {})
PY
)

# Run from outside the source tree so `import zarrow` is the installed wheel.
cd "$TEST_VENV"
"$TEST_VENV/bin/python" -c "import zarrow, sys; assert 'site-packages' in zarrow.__file__, zarrow.__file__; print('ci.sh: testing', zarrow.__file__)"
"$TEST_VENV/bin/python" -m pytest -q -p no:cacheprovider "$HERE/tests"

# The stubs match the runtime (stubtest) and type a caller's code (mypy --strict over the
# typed test file), against the installed wheel.
echo "ci.sh: stubtest and mypy --strict"
"$TEST_VENV/bin/python" -m mypy.stubtest zarrow --mypy-config-file "$HERE/ci/mypy.ini" \
    --allowlist "$HERE/ci/stubtest-allowlist.txt"
"$TEST_VENV/bin/python" -m mypy --config-file "$HERE/ci/mypy.ini" --strict \
    "$HERE/tests/test_typed_api.py"

# The tools benchmark's harness, on a 20k-row store, one run of each tool in its own process
# (the tools not installed here are reported as skipped): it runs and the answers agree.
echo "ci.sh: benches/python_tools_compare.py --smoke"
"$TEST_VENV/bin/python" "$ROOT/benches/python_tools_compare.py" --smoke \
    --tools zarrow_polars,zarrow_polars_dictionary,zarrow_polars_categorical,zarrow_datafusion,zarrow_duckdb,zarr_python,polars_parquet,duckdb_parquet

# CI's disk is limited: the test venv (1.2 GB) is not needed past this point there. Elsewhere it
# stays, for benches/sizes.py and for looking into a failure.
# (The tests ran from inside it: leave it for its parent, outside the source tree too.)
cd "$(dirname "$TEST_VENV")"
if [[ "${CI:-}" == true ]]; then rm -rf "$TEST_VENV"; fi

# A datafusion-python of another major version next to the wheel (xarray-sql pins 54): the
# FFI structs differ, so registering must raise zarrow.ZarrowError naming both versions, and
# the interpreter must go on. (The registry has no datafusion 56 yet.)
MISMATCH_VENV="${ZARROW_TEST_VENV:-$ROOT/target/venv-zarrow-wheel}-datafusion54"
rm -rf "$MISMATCH_VENV"
"$PYTHON" -m venv "$MISMATCH_VENV"
"$MISMATCH_VENV/bin/pip" install --quiet --disable-pip-version-check "datafusion==54.1.0" \
    "pyarrow==26.0.1" "$WHEEL"
"$MISMATCH_VENV/bin/python" "$HERE/ci/datafusion_mismatch.py" "$ROOT/data/pbmc_sample.zarr/obs"
if [[ "${CI:-}" == true ]]; then rm -rf "$MISMATCH_VENV"; fi
