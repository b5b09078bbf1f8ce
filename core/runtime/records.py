"""Per-record rows <-> Arrow batches, once per batch, with errors that name the column.

Also where output schemas are kept: a declared ``output_schema`` is enforced (rows built
against it, batches cast to it), and an inferred one does not lock a column to Arrow's
null type just because the first output had only nulls there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.types as pat

from flintlock.core.errors import SchemaMismatchError
from flintlock.core.state.descriptors import ListStateDescriptor

if TYPE_CHECKING:
    from flintlock.core.state.operator_state import OperatorStateStore

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError)


RowsMaker = Callable[..., list[dict[str, Any]]]
_ROWS_MAKERS: dict[tuple[str, ...], RowsMaker] = {}


def rows_of(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """``batch.to_pylist()``, about twice as fast: numeric columns without nulls go through
    numpy, and the rows are built by a comprehension generated once per column list."""
    names = tuple(batch.schema.names)
    make = _ROWS_MAKERS.get(names)
    if make is None:
        make = _ROWS_MAKERS[names] = _rows_maker(names)
    return make(*map(_column_values, batch.columns))


def _column_values(column: pa.Array) -> list[Any]:
    kind = column.type
    if column.null_count == 0 and (pat.is_integer(kind) or pat.is_floating(kind)):
        return column.to_numpy().tolist()  # the same Python ints and floats, 5-10x faster
    return column.to_pylist()


def _rows_maker(names: tuple[str, ...]) -> RowsMaker:
    """``lambda c0, c1: [{'a': v0, 'b': v1} for v0, v1 in zip(c0, c1)]`` for ``names``.

    Column names enter the code only through ``repr`` (a string literal), never as code."""
    if not names:
        return lambda: []
    columns = ", ".join(f"c{i}" for i in range(len(names)))
    values = ", ".join(f"v{i}" for i in range(len(names)))
    row = ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names))
    source = f"lambda {columns}: [{{{row}}} for {values}, in zip({columns}, strict=True)]"
    return eval(source, {"__builtins__": {"zip": zip}})


MAX_HELD_ROWS = 1_000_000
"""Output rows held while a column of an inferred schema is still null-typed; past this,
the held rows are emitted as they are and the column stays null-typed."""

HELD_OUTPUT = ListStateDescriptor("flintlock-held-output", pa.binary())
"""Operator state for held output at a checkpoint: one Arrow IPC stream per held batch."""


def table_of_rows(rows: Sequence[dict[str, Any]], schema: pa.Schema | None, what: str) -> pa.Table:
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
        except _ARROW_ERRORS as error:
            raise _value_error(what, field.name, values, declared, error) from error
    if schema is not None:
        return pa.Table.from_arrays(arrays, schema=schema)
    return pa.Table.from_arrays(arrays, names=[f.name for f in fields])


def _value_error(
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
        except _ARROW_ERRORS:
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
        detail = _column_difference(missing, extra)
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
            except _ARROW_ERRORS as error:
                raise SchemaMismatchError(
                    f"operator '{operator_name}': output column '{field.name}' of type "
                    f"{column.type} does not cast to its output_schema type {field.type} "
                    f"({error})"
                ) from error
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _cast_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A held batch brought to the resolved schema (null columns cast to their new type)."""
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays(
        [batch.column(field.name).cast(field.type) for field in schema], schema=schema
    )


class RowBatchBuilder:
    """Turns rows from a per-record function into batches of one schema.

    The schema is the declared one or, if none, that of the first non-empty output; a
    later row that does not fit raises an error naming the operator and the column. While
    a column of an inferred schema has had only nulls (Arrow's null type), output batches
    are held back and released, cast to the column's type, by the first batch that has a
    value there; at the end of input (``release_held``) they are emitted as they are.
    Declared schemas never hold anything.
    """

    def __init__(self, operator_name: str, schema: pa.Schema | None = None) -> None:
        self.operator_name = operator_name
        self.schema = schema
        self.declared = schema is not None
        self._names = frozenset(schema.names) if schema is not None else None
        self._unresolved: frozenset[str] = frozenset()
        self.held: list[pa.RecordBatch] = []
        self._held_rows = 0

    def build(self, rows: list[dict[str, Any]]) -> pa.RecordBatch | None:
        """One batch of ``rows`` (with any held batches before them); None if none is ready."""
        if not rows:
            return None
        if self.schema is None:
            batch = self._first_batch(rows)
            self.schema, self._names = batch.schema, frozenset(batch.schema.names)
            self._unresolved = _null_columns(batch.schema)
            return self._hold_or_release(batch) if self._unresolved else batch
        names = self._names
        # every row has exactly the schema's columns iff all have that many keys and no key
        # falls outside them: two C-level passes instead of a comparison per row
        try:
            fits = set(map(len, rows)) == {len(names)} and set().union(*rows) == names
        except TypeError:  # a row that is not a dict
            fits = False
        if not fits:
            for row in rows:
                if not isinstance(row, dict) or row.keys() != names:
                    self._raise_for_columns(row)
        if self._unresolved:
            self._resolve(rows)
            return self._hold_or_release(self._with_schema(rows))
        return self._with_schema(rows)

    def empty(self) -> pa.RecordBatch | None:
        """An empty batch of the declared schema (so an empty input keeps it), else None."""
        return pa.RecordBatch.from_pylist([], schema=self.schema) if self.declared else None  # type: ignore[union-attr]

    def release_held(self) -> pa.RecordBatch | None:
        """The held batches as one batch, as they are (the input ended); None if none."""
        if not self.held:
            return None
        assert self.schema is not None
        batch = _concat([_cast_batch(b, self.schema) for b in self.held], self.schema)
        self.held, self._held_rows = [], 0
        return batch

    def held_as_ipc(self) -> list[bytes]:
        """The held batches as Arrow IPC streams (for operator state at a checkpoint)."""
        if not self.held:
            return []
        assert self.schema is not None
        out = []
        for batch in self.held:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, self.schema) as writer:
                writer.write_batch(_cast_batch(batch, self.schema))
            out.append(sink.getvalue().to_pybytes())
        return out

    def restore_held(self, streams: list[bytes]) -> None:
        """Hold again the batches of ``held_as_ipc`` (from one or more old subtasks)."""
        batches = [b for data in streams for b in pa.ipc.open_stream(data).read_all().to_batches()]
        if not batches or self.declared:
            for batch in batches:  # a schema declared since: conform to it
                self.held.append(conform_batch(batch, self.schema, self.operator_name))  # type: ignore[arg-type]
            return
        try:
            schema = pa.unify_schemas([b.schema for b in batches])
        except _ARROW_ERRORS as error:
            raise SchemaMismatchError(
                f"operator '{self.operator_name}': restored output of different schemas "
                f"({error}); declare output_schema"
            ) from error
        self.schema, self._names = schema, frozenset(schema.names)
        self._unresolved = _null_columns(schema)
        self.held = [_cast_batch(b, schema) for b in batches]
        self._held_rows = sum(b.num_rows for b in self.held)

    # ---- internals ----

    def _with_schema(self, rows: list[dict[str, Any]]) -> pa.RecordBatch:
        try:
            return pa.RecordBatch.from_pylist(rows, schema=self.schema)
        except _ARROW_ERRORS as error:
            raise self._locate(rows, error) from error

    def _resolve(self, rows: list[dict[str, Any]]) -> None:
        """Give still null-typed columns the type of their first values in ``rows``."""
        assert self.schema is not None
        resolved: dict[str, pa.DataType] = {}
        for name in self._unresolved:
            values = [row[name] for row in rows]
            try:
                kind = pa.array(values).type
            except _ARROW_ERRORS as error:
                raise _value_error(
                    f"operator '{self.operator_name}'", name, values, None, error
                ) from error
            if not pat.is_null(kind):
                resolved[name] = kind
        if resolved:
            self.schema = pa.schema(
                [f.with_type(resolved[f.name]) if f.name in resolved else f for f in self.schema]
            )
            self._unresolved = self._unresolved - resolved.keys()

    def _hold_or_release(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        self.held.append(batch)
        self._held_rows += batch.num_rows
        if self._unresolved and self._held_rows < MAX_HELD_ROWS:
            return None
        self._unresolved = frozenset()  # resolved, or held too long: the types stay
        return self.release_held()

    def _first_batch(self, rows: list[dict[str, Any]]) -> pa.RecordBatch:
        first = rows[0]
        for row in rows:
            if not isinstance(row, dict):
                raise SchemaMismatchError(
                    f"operator '{self.operator_name}' produced {type(row).__name__} "
                    f"{row!r}; per-record functions return dicts of column -> value"
                )
            if row.keys() != first.keys():
                self._names = frozenset(first)
                self._raise_for_columns(row)
        try:
            return pa.RecordBatch.from_pylist(rows)
        except _ARROW_ERRORS as error:
            for name in first:
                values = [row[name] for row in rows]
                try:
                    pa.array(values)
                except _ARROW_ERRORS as column_error:
                    raise _value_error(
                        f"operator '{self.operator_name}'",
                        name,
                        values,
                        None,
                        column_error,
                        "declare output_schema to choose the type",
                    ) from error
            raise SchemaMismatchError(
                f"operator '{self.operator_name}': its output rows do not form one Arrow "
                f"schema ({error}); declare output_schema on the function"
            ) from error

    def _raise_for_columns(self, row: Any) -> None:
        if not isinstance(row, dict):
            raise SchemaMismatchError(
                f"operator '{self.operator_name}' produced {type(row).__name__} {row!r}; "
                f"per-record functions return dicts of column -> value"
            )
        expected = self._names or frozenset()
        missing = sorted(expected - row.keys())
        extra = sorted(row.keys() - expected)
        detail = _column_difference(missing, extra)
        raise SchemaMismatchError(
            f"operator '{self.operator_name}': output row {row!r} does not fit the output "
            f"schema ({detail}); expected columns {sorted(expected)}"
        )

    def _locate(self, rows: list[dict[str, Any]], error: Exception) -> SchemaMismatchError:
        assert self.schema is not None
        for field in self.schema:
            values = [row[field.name] for row in rows]
            try:
                pa.array(values, type=field.type)
            except _ARROW_ERRORS as column_error:
                return _value_error(
                    f"operator '{self.operator_name}'",
                    field.name,
                    values,
                    field.type,
                    column_error,
                    "the type was declared in output_schema"
                    if self.declared
                    else "the schema was fixed by the first output, declare output_schema "
                    "to choose it",
                )
        return SchemaMismatchError(f"operator '{self.operator_name}': {error}")


def _null_columns(schema: pa.Schema) -> frozenset[str]:
    return frozenset(field.name for field in schema if pat.is_null(field.type))


def _concat(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches, schema).combine_chunks().to_batches()[0]


def restore_held_output(builder: RowBatchBuilder, store: OperatorStateStore) -> None:
    """In initialize_state: hold again what the restored checkpoint held back."""
    if store.has_restored(HELD_OUTPUT.name):
        builder.restore_held(store.get_list_state(HELD_OUTPUT).get())


def snapshot_held_output(builder: RowBatchBuilder, store: OperatorStateStore) -> None:
    """In snapshot_state: put held-back output into operator state (nothing if none)."""
    if builder.held or store.has_state(HELD_OUTPUT.name):
        store.get_list_state(HELD_OUTPUT).update(builder.held_as_ipc())


class HeldOutputMixin:
    """For operators that build their output with a RowBatchBuilder (``self._builder``):
    output held back for a still null-typed column survives checkpoints (operator state)
    and is emitted by ``emit_held``, which the operator calls in its finish()."""

    _builder: RowBatchBuilder
    context: Any
    output: Any

    def initialize_state(self) -> None:
        super().initialize_state()  # type: ignore[misc]
        restore_held_output(self._builder, self.context.operator_state)

    def snapshot_state(self, checkpoint_id: int) -> None:
        super().snapshot_state(checkpoint_id)  # type: ignore[misc]
        snapshot_held_output(self._builder, self.context.operator_state)

    def emit_held(self) -> None:
        """Emit what is still held, as it is (the input ended)."""
        batch = self._builder.release_held()
        if batch is not None:
            self.output.emit(batch)

    def emit_empty(self) -> None:
        """An empty input batch: emit an empty batch of the declared output schema, if any,
        so that an empty input keeps its schema downstream."""
        batch = self._builder.empty()
        if batch is not None:
            self.output.emit(batch)


def _column_difference(missing: list[str], extra: list[str]) -> str:
    """'missing column(s) [...]; unexpected column(s) [...]', leaving out what is empty."""
    parts = [
        f"missing column(s) {missing}" if missing else "",
        f"unexpected column(s) {extra}" if extra else "",
    ]
    return "; ".join(part for part in parts if part)
