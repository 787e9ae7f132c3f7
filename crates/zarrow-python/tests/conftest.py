"""Shared fixtures: where the repository's fixture stores are, and the Rust CLI to compare with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "fixtures" / "data"
SAMPLE = REPO / "data" / "pbmc_sample.zarr"


def zarrow_cli() -> Path:
    """The Rust `zarrow` binary (ZARROW_CLI, else the debug build)."""
    return Path(os.environ.get("ZARROW_CLI", REPO / "target" / "debug" / "zarrow"))


@pytest.fixture(scope="session")
def cli() -> Path:
    path = zarrow_cli()
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the zarrow CLI is not built at {path}")
        pytest.skip(f"no zarrow CLI at {path}: cargo build -p zarrow-cli")
    return path


def rust_table(cli: Path, location: str, tmp_path: Path):
    """The table at `location` as the Rust side reads it (`zarrow export --format arrow`)."""
    import pyarrow as pa

    out = tmp_path / "rust.arrow"
    subprocess.run([str(cli), "export", location, "--output", str(out), "--format", "arrow"],
                   check=True, capture_output=True)
    with pa.memory_map(str(out)) as source:
        return pa.ipc.open_file(source).read_all()


def server(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {var} is not set: tests/run-all.sh starts the servers")
        pytest.skip(f"{var} not set (eval \"$(bash tests/remote/start.sh)\")")
    return value
