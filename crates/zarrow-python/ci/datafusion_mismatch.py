"""Run by ci.sh in a venv with the zarrow wheel and a datafusion-python of ANOTHER major version
than the one zarrow was built for: registering a zarrow table or table factory must raise
zarrow.ZarrowError naming both versions, and the interpreter must go on (a segmentation fault
ends this process with a signal, which ci.sh reports as a failure).

    python datafusion_mismatch.py STORE_NODE
"""

from __future__ import annotations

import sys

import datafusion
from datafusion import SessionContext

import zarrow

location = sys.argv[1]
ctx = SessionContext()
table = zarrow.ZarrTable(location)
print(f"datafusion {datafusion.__version__} installed; registering a zarrow table")
for what, register in [
    ("register_table", lambda: ctx.register_table("t", table)),
    ("register_table_factory", lambda: ctx.register_table_factory("ZARR", zarrow.ZarrTableFactory())),
    ("__datafusion_table_provider__", lambda: table.__datafusion_table_provider__(ctx)),
]:
    try:
        register()
    except zarrow.ZarrowError as e:
        message = str(e)
    except Exception as e:  # datafusion-python may wrap the error in its own exception
        message = str(e)
        if "this zarrow was built for datafusion" not in message:
            raise
    else:
        sys.exit(f"{what}: no error with datafusion {datafusion.__version__}")
    print(f"{what}: {message}")
    assert "this zarrow was built for datafusion 55.x" in message, message
    assert datafusion.__version__ in message, message
    assert "'datafusion>=55,<56'" in message, message
# The interpreter is still usable, and so is zarrow without datafusion.
import pyarrow as pa

rows = pa.RecordBatchReader.from_stream(zarrow.scan(location)).read_all().num_rows
assert rows > 0
print(f"datafusion_mismatch: clean errors, the process goes on ({rows} rows read by zarrow.scan)")
