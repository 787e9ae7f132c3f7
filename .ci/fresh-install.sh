#!/usr/bin/env bash
# The README as a new user follows it, from outside the repository: install the CLI with
# `cargo install --path crates/zarrow-cli` (into a throwaway root), install the wheel with pip into
# a clean venv, then run the README's shell examples and its Python example, verbatim, in an empty
# directory holding only a copy of the sample store. Any failing line fails the script.
#   bash .ci/fresh-install.sh              (after crates/zarrow-python/ci.sh built the wheel)
# Env: ZARROW_WHEELS (where ci.sh put the wheel; default target/wheels), PYTHON (default python3).
# Under CI=true the CLI is installed with --debug into the workspace's target dir (CI builds no
# release profile); elsewhere it is the README's release install, in a target dir of its own.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WHEELS="${ZARROW_WHEELS:-$ROOT/target/wheels}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zarrow-fresh.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
say() { printf 'fresh-install: %s\n' "$*"; }

# The README's fenced block of a language, under a heading (the first such block after it).
readme_block() {
    "$PYTHON" - "$ROOT/README.md" "$1" "$2" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
heading, lang = sys.argv[2], sys.argv[3]
section = text[text.index(heading):]
match = re.search(r"```" + lang + r"\n(.*?)```", section, re.S)
if not match:
    sys.exit(f"README: no ```{lang} block under {heading!r}")
sys.stdout.write(match.group(1))
PY
}

# 1. The CLI, by the README's install command (plus where it goes).
install_line="$(readme_block '## Install' sh | grep -m1 '^cargo install')"
say "installing the CLI: $install_line"
read -r -a install_cmd <<<"$install_line"
if [[ "${CI:-}" == true ]]; then
    (cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target" "${install_cmd[@]}" --debug --root "$WORK/cargo")
else
    (cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/fresh-install" "${install_cmd[@]}" --root "$WORK/cargo")
fi
export PATH="$WORK/cargo/bin:$PATH"
[[ "$(command -v zarrow)" == "$WORK/cargo/bin/zarrow" ]] || { say "zarrow is not the installed one"; exit 1; }
zarrow --version

# 2. The wheel, into a clean venv, with the README's pip line (its dist/ is our wheel dir).
pip_line="$(readme_block '**Python**' sh | grep -m1 '^pip install dist/')"
wheel="$(ls "$WHEELS"/zarrow-*.whl 2>/dev/null | head -1)"
[[ -n "$wheel" ]] || { say "no wheel in $WHEELS (run crates/zarrow-python/ci.sh first)"; exit 1; }
say "installing the wheel: ${pip_line/dist\/zarrow-\*.whl/$wheel}"
"$PYTHON" -m venv "$WORK/venv"
read -r -a pip_args <<<"${pip_line#pip install }"
pip_args=("${pip_args[@]/dist\/zarrow-\*.whl/$wheel}")
# the quotes of 'datafusion>=55,<56' are the shell's: strip them as the shell would
pip_args=("${pip_args[@]//\'/}")
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check "${pip_args[@]}"

# 3. A directory outside the repository with only the sample store in it.
mkdir -p "$WORK/user/data"
cp -r "$ROOT/data/pbmc_sample.zarr" "$WORK/user/data/"
cd "$WORK/user"

say "the README's sample query"
sample="$(readme_block '## Two commands' sh | grep -m1 'cargo run')"
# `cargo run -q -p zarrow-cli --` is the installed `zarrow` outside the repository
eval "zarrow ${sample#*-- }"

say "the README's shell examples"
readme_block '## SQL over the sample store' sh >examples.sh
# The bare `zarrow sql` line opens the shell on a terminal; here its stdin is a pipe, so it runs
# the statements piped in, as a script would use it.
grep -q '^zarrow sql  *#' examples.sh || { say "README: the shell example is gone"; exit 1; }
sed -i 's/^zarrow sql  *#.*/echo "SELECT count(*) AS cells FROM '"'"'data\/pbmc_sample.zarr\/obs'"'"';" | zarrow sql/' examples.sh
bash -euo pipefail examples.sh
[[ -s b.parquet ]] || { say "the export example wrote no b.parquet"; exit 1; }

say "the README's Python example"
readme_block '## Python' python >example.py
"$WORK/venv/bin/python" example.py
"$WORK/venv/bin/python" -c "import zarrow, sys; sys.exit('zarrow comes from the source tree' if '$ROOT' in zarrow.__file__ else 0)"
say "ok"
