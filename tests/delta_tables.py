"""Reading a Delta table back in tests with deltalake's own reader (its SQL engine).

Not ``DeltaTable.to_pyarrow_table()``: a process that used it aborts now and then as it
exits ("terminate called without an active exception", delta-rs issue 2184; measured
here on deltalake 1.6.6: 1 of 20 processes), which fails a test run that passed.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder


def read_delta(uri: str | Path, version: int | None = None) -> pa.Table:
    """The rows of the table at ``uri`` (``version``, else the newest) in the table's own
    schema, sorted by ``id`` when the table has that column."""
    table = DeltaTable(str(uri), version=version)
    schema = pa.schema(table.schema().to_arrow())
    order = " ORDER BY id" if "id" in schema.names else ""
    read = QueryBuilder().register("t", table).execute(f"SELECT * FROM t{order}").read_all()
    return pa.table(read).select(schema.names).cast(schema)  # string_view -> string
