"""Per-record rows <-> Arrow batches, once per batch, with errors that name the column.

Also how output schemas are kept: a declared ``output_schema`` is enforced (rows built
against it, batches cast to it), and an inferred one does not lock a column to Arrow's
null type just because the first output had only nulls there (``row_batches.py`` builds
a per-record function's output batches).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.types as pat

from flintlock.core.errors import SchemaMismatchError

if TYPE_CHECKING:
    from flintlock.core.api.functions import Row

ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError)


RowsMaker = Callable[..., list[dict[str, Any]]]
_ROWS_MAKERS: dict[tuple[str, ...], RowsMaker] = {}


def rows_of(batch: pa.RecordBatch) -> list[Row]:
    """``batch.to_pylist()``, faster: numeric columns without nulls go through numpy, and
    the rows are built by a comprehension generated once per column list (bench/RESULTS.md,
    "W1")."""
    names = tuple(batch.schema.names)
    make = _ROWS_MAKERS.get(names)
    if make is None:
        make = _ROWS_MAKERS[names] = _rows_maker(names)
    return make(*map(column_values, batch.columns))


def column_values(column: pa.Array) -> list[Any]:
    """A column's values as Python objects, numeric ones without nulls through numpy."""
    kind = column.type
    if column.null_count == 0 and (pat.is_integer(kind) or pat.is_floating(kind)):
        values: list[Any] = column.to_numpy().tolist()  # the same ints and floats, faster
    else:
        values = column.to_pylist()
    return values


def _rows_maker(names: tuple[str, ...]) -> RowsMaker:
    """``lambda c0, c1: [{'a': v0, 'b': v1} for v0, v1 in zip(c0, c1)]`` for ``names``.

    Column names enter the code only through ``repr`` (a string literal), never as code."""
    if not names:
        return lambda: []
    columns = ", ".join(f"c{i}" for i in range(len(names)))
    values = ", ".join(f"v{i}" for i in range(len(names)))
    row = ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names))
    source = f"lambda {columns}: [{{{row}}} for {values}, in zip({columns}, strict=True)]"
    maker: RowsMaker = eval(source, {"__builtins__": {"zip": zip}})
    return maker


def table_of_rows(rows: Sequence[Row], schema: pa.Schema | None, what: str) -> pa.Table:
    """``rows`` as one table, typed by ``schema`` or inferred over every row (not a sample).

    Columns are the declared ones, or every key in order of first appearance (a row
    without a key has a null there). A value that does not fit raises an error naming
    ``what``, the column, the row and the value."""
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SchemaMismatchError(
                f"{what}: row {index} is {type(row).__name__} {_short(row)}; rows are dicts "
                f"of column -> value"
            )
    if schema is not None:
        fields = list(schema)
    else:
        names = list(dict.fromkeys(name for row in rows for name in row))
        fields = [pa.field(name, pa.null()) for name in names]
    arrays = []
    for field in fields:
        values = [row.get(field.name) for row in rows]
        declared = field.type if schema is not None else None
        try:
            arrays.append(pa.array(values, type=declared))
        except ARROW_ERRORS as error:
            raise value_error(what, field.name, values, declared, error) from error
    if schema is not None:
        return pa.Table.from_arrays(arrays, schema=schema)
    return pa.Table.from_arrays(arrays, names=[f.name for f in fields])


def value_error(
    what: str,
    column: str,
    values: list[Any],
    kind: pa.DataType | None,
    error: Exception,
    hint: str = "fix the value or declare schema=",
) -> SchemaMismatchError:
    """Names the first value of ``column`` that does not fit ``kind`` (or, if None, the type
    of the values before it)."""
    # the longest prefix that converts, found by bisection (C-speed passes)
    low, high = 0, len(values)
    while low < high:
        middle = (low + high + 1) // 2
        try:
            pa.array(values[:middle], type=kind)
            low = middle
        except ARROW_ERRORS:
            high = middle - 1
    bad = values[low] if low < len(values) else None
    where = f"row {low} has {type(bad).__name__} {_short(bad)}"
    if kind is not None:
        problem = f"does not fit its type {kind}: {where}"
    elif any(v is not None for v in values[:low]):
        before = pa.array(values[:low]).type
        problem = f"does not fit one type: {where}, the rows before it are {before}"
    else:
        problem = f"does not fit an Arrow type: {where}"
    return SchemaMismatchError(f"{what}: column '{column}' {problem} ({error}); {hint}")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema, operator_name: str) -> pa.RecordBatch:
    """``batch`` with exactly ``schema``: columns taken by name and cast where the type
    differs; a missing or extra column, or a value that does not cast, is an error naming it.

    One schema comparison per batch when the batch already fits (the usual case)."""
    if batch.schema.equals(schema):
        return batch
    names = batch.schema.names
    extra = [name for name in names if schema.get_field_index(name) < 0]
    missing = [field.name for field in schema if field.name not in names]
    if missing or extra:
        detail = column_difference(missing, extra)
        raise SchemaMismatchError(
            f"operator '{operator_name}': its output batch does not fit output_schema "
            f"({detail}); expected columns {schema.names}, got {names}"
        )
    columns = []
    for field in schema:
        column = batch.column(field.name)
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except ARROW_ERRORS as error:
                raise SchemaMismatchError(
                    f"operator '{operator_name}': output column '{field.name}' of type "
                    f"{column.type} does not cast to its output_schema type {field.type} "
                    f"({error})"
                ) from error
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def cast_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A held batch brought to the resolved schema (null columns cast to their new type)."""
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays(
        [batch.column(field.name).cast(field.type) for field in schema], schema=schema
    )


def column_difference(missing: list[str], extra: list[str]) -> str:
    """'missing column(s) [...]; unexpected column(s) [...]', leaving out what is empty."""
    parts = [
        f"missing column(s) {missing}" if missing else "",
        f"unexpected column(s) {extra}" if extra else "",
    ]
    return "; ".join(part for part in parts if part)
