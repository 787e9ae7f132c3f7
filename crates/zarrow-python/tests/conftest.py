"""Shared fixtures: where the repository's fixture stores are, and the Rust CLI to compare with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "fixtures" / "data"
SAMPLE = REPO / "data" / "pbmc_sample.zarr"


def fixture_tables() -> list[str]:
    """Every array and group of the fixture stores the Rust side reads as a table."""
    locations = []
    for store in sorted(DATA.glob("*.zarr")):
        locations.append(str(store))
        for meta in sorted(store.rglob("zarr.json")) + sorted(store.rglob(".zarray")) + sorted(
            store.rglob(".zgroup")
        ):
            node = meta.parent
            if node != store:
                locations.append(str(node))
    return sorted(set(locations))


def sorted_by_all(table: pa.Table) -> pa.Table:
    keys = [(name, "ascending") for name in table.column_names
            if pa.types.is_integer(table.schema.field(name).type)]
    return table.sort_by(keys) if keys else table


def ipc_bytes(table: pa.Table) -> bytes:
    """The table's values as IPC bytes: equal tables give equal bytes, NaN included (which
    `Table.equals` counts as different from itself). Field and schema metadata (what a column
    is: `zarrow.role`, …) are left out: values are compared, the schemas apart."""
    table = table.replace_schema_metadata(None)
    table = table.cast(pa.schema([f.remove_metadata() for f in table.schema]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return sink.getvalue().to_pybytes()


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


def sql_answer(location: str, where: str | None = None, columns: list[str] | None = None,
               limit: int | None = None, **options):
    """What the SQL path (datafusion-python over `zarrow.ZarrTable`) answers, in one partition
    so the rows come in chunk order: `SELECT columns FROM t [WHERE where] [LIMIT limit]`."""
    datafusion = pytest.importorskip("datafusion")
    import zarrow

    config = datafusion.SessionConfig().with_target_partitions(1)
    ctx = datafusion.SessionContext(config)
    ctx.register_table("t", zarrow.ZarrTable(location, **options))
    select = ", ".join(f'"{c}"' for c in columns) if columns else "*"
    query = f"SELECT {select} FROM t"
    if where:
        query += f" WHERE {where}"
    if limit is not None:
        query += f" LIMIT {limit}"
    return ctx.sql(query).to_arrow_table()


def first_column_predicate(table) -> str | None:
    """A SQL predicate on `table`'s first column (its first dimension, as zarrow lays tables
    out) that keeps about half the rows, or None for a type with no order to split on."""
    import pyarrow.compute as pc

    name = table.column_names[0]
    column = table.column(0).drop_null()
    kind = column.type
    if len(column) == 0:
        return None
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        values = sorted(v for v in column.to_pylist() if v == v)
        return f'"{name}" >= {values[len(values) // 2]}' if values else None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        values = sorted(pc.cast(column, pa.string()).to_pylist())
        middle = values[len(values) // 2].replace("'", "''")
        return f"\"{name}\" >= '{middle}'"
    return None
