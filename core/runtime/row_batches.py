"""The batches a per-record function's rows become (``RowBatchBuilder``): one schema,
declared or inferred from the first output, and output held back (across checkpoints,
as operator state) while a column of an inferred schema is still null-typed.

A stream's batches share one schema, and a column whose first outputs are all null would
otherwise be locked to Arrow's null type; held back, they are emitted cast to the type of
the first value that arrives (CONTRIBUTING.md, "Output schemas")."""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from types import NoneType
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.types as pat

from flintlock.core.errors import SchemaMismatchError
from flintlock.core.runtime.records import (
    ARROW_ERRORS,
    cast_batch,
    column_difference,
    conform_batch,
    value_error,
)
from flintlock.core.state.descriptors import ListStateDescriptor

if TYPE_CHECKING:
    from flintlock.core.api.functions import Row
    from flintlock.core.runtime.operator import OperatorContext
    from flintlock.core.runtime.output import Output
    from flintlock.core.state.operator_state import OperatorStateStore

MAX_HELD_ROWS = 1_000_000
"""Output rows held while a column of an inferred schema is still null-typed; past this,
the held rows are emitted as they are and the column stays null-typed."""

HELD_OUTPUT = ListStateDescriptor[bytes]("flintlock-held-output", pa.binary())
"""Operator state for held output at a checkpoint: one Arrow IPC stream per held batch."""


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
        self._unchanged = _unchanged_checks(schema) if schema is not None else None
        self._unresolved: frozenset[str] = frozenset()
        self.held: list[pa.RecordBatch] = []
        self._held_rows = 0

    def build(self, rows: list[Row]) -> pa.RecordBatch | None:
        """One batch of ``rows`` (with any held batches before them); None if none is ready."""
        if not rows:
            return None
        if self.schema is None:
            batch = self._first_batch(rows)
            self.schema, self._names = batch.schema, frozenset(batch.schema.names)
            self._unresolved = _null_columns(batch.schema)
            return self._hold_or_release(batch) if self._unresolved else batch
        if self._unresolved:
            self._check_columns(rows, self._names)
            self._resolve(rows)
            return self._hold_or_release(self._with_schema(rows))
        return self._with_schema(rows)

    def passes_as_rows(self, rows: list[Row]) -> bool:
        """True if ``rows`` (not empty) would come back from a batch of the declared schema
        as they are: dicts with exactly its columns, each value of the Python type its
        column gives back (an int within the integer type's range, a float for float64, a
        str, bytes or bool; None where the field is nullable). Then a next per-record
        function may take them without the batch; key order stays the function's own."""
        checks = self._unchanged
        if checks is None:
            return False
        try:
            if set(map(type, rows)) != {dict} or set(map(len, rows)) != {len(checks)}:
                return False
            for take, kinds, bounds in checks:
                values = list(map(take, rows))
                found = set(map(type, values))
                if not found <= kinds:
                    return False
                if bounds is not None:
                    if NoneType in found:
                        values = [value for value in values if value is not None]
                    if values and not (bounds[0] <= min(values) and max(values) <= bounds[1]):
                        return False
        except KeyError:
            return False
        return True

    def check_rows(self, rows: list[Row]) -> None:
        """Check rows that go on as they are (to a next per-record function): dicts with
        the columns of the first row seen; their values are not converted."""
        names = self._names
        if names is None:
            if not isinstance(rows[0], dict):
                self._raise_for_columns(rows[0])
            names = self._names = frozenset(rows[0])
        self._check_columns(rows, names)

    def _check_columns(self, rows: list[dict[str, Any]], names: Any) -> None:
        """Every row is a dict with exactly ``names`` as keys iff all are dicts, all have
        that many keys and no key falls outside them: C-level passes, not a comparison per
        row (a row of a dict subclass takes the per-row check)."""
        try:
            fits = (
                set(map(type, rows)) == {dict}
                and set(map(len, rows)) == {len(names)}
                and set().union(*rows) == names
            )
        except TypeError:  # a row that is not a dict
            fits = False
        if not fits:
            self._raise_for_misfit(rows, names)

    def _raise_for_misfit(self, rows: list[dict[str, Any]], names: Any) -> None:
        """Raise for the first row that is not a dict with exactly ``names`` as keys."""
        for row in rows:
            if not isinstance(row, dict) or row.keys() != names:
                self._raise_for_columns(row)

    def empty(self) -> pa.RecordBatch | None:
        """An empty batch of the declared schema (so an empty input keeps it), else None."""
        return pa.RecordBatch.from_pylist([], schema=self.schema) if self.declared else None

    def release_held(self) -> pa.RecordBatch | None:
        """The held batches as one batch, as they are (the input ended); None if none."""
        if not self.held:
            return None
        assert self.schema is not None
        batch = _concat([cast_batch(b, self.schema) for b in self.held], self.schema)
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
                writer.write_batch(cast_batch(batch, self.schema))
            out.append(sink.getvalue().to_pybytes())
        return out

    def restore_held(self, streams: list[bytes]) -> None:
        """Hold again the batches of ``held_as_ipc`` (from one or more old subtasks)."""
        batches = [b for data in streams for b in pa.ipc.open_stream(data).read_all().to_batches()]
        if not batches or self.declared:
            for batch in batches:  # a schema declared since: conform to it
                self.held.append(conform_batch(batch, self.schema, self.operator_name))
            return
        try:
            schema = pa.unify_schemas([b.schema for b in batches])
        except ARROW_ERRORS as error:
            raise SchemaMismatchError(
                f"operator '{self.operator_name}': restored output of different schemas "
                f"({error}); declare output_schema"
            ) from error
        self.schema, self._names = schema, frozenset(schema.names)
        self._unresolved = _null_columns(schema)
        self.held = [cast_batch(b, schema) for b in batches]
        self._held_rows = sum(b.num_rows for b in self.held)

    # ---- internals ----

    def _with_schema(self, rows: list[dict[str, Any]]) -> pa.RecordBatch:
        """``RecordBatch.from_pylist(rows, schema)`` once the rows are known to have exactly
        the schema's columns: each column taken by a C-level ``map(itemgetter)``."""
        assert self.schema is not None
        columns = self._columns_of(rows)
        try:
            return pa.RecordBatch.from_arrays(columns, schema=self.schema)
        except ARROW_ERRORS as error:
            raise self._locate(rows, error) from error

    def _columns_of(self, rows: list[dict[str, Any]]) -> list[list[Any]]:
        """The schema's columns of ``rows``, which must have exactly its names as keys: as
        many keys as names and every name found means no other key (one pass for the
        lengths; a missing name or a row that is not a mapping fails in the take)."""
        assert self.schema is not None
        names = self.schema.names
        try:
            if set(map(len, rows)) == {len(names)}:
                return [list(map(itemgetter(name), rows)) for name in names]
        except (KeyError, TypeError):
            pass
        self._raise_for_misfit(rows, self._names)  # raises, naming the row that does not fit
        return [list(map(itemgetter(name), rows)) for name in names]  # dict subclasses

    def _resolve(self, rows: list[dict[str, Any]]) -> None:
        """Give still null-typed columns the type of their first values in ``rows``."""
        assert self.schema is not None
        resolved: dict[str, pa.DataType] = {}
        for name in self._unresolved:
            values = [row[name] for row in rows]
            try:
                kind = pa.array(values).type
            except ARROW_ERRORS as error:
                raise value_error(
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
        except ARROW_ERRORS as error:
            for name in first:
                values = [row[name] for row in rows]
                try:
                    pa.array(values)
                except ARROW_ERRORS as column_error:
                    raise value_error(
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
        detail = column_difference(missing, extra)
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
            except ARROW_ERRORS as column_error:
                return value_error(
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


UnchangedCheck = tuple[Callable[[dict[str, Any]], Any], frozenset[type], tuple[int, int] | None]


def _unchanged_checks(schema: pa.Schema) -> list[UnchangedCheck] | None:
    """Per field: its value taker, the Python types that come back from its Arrow type as
    they went in, and an integer type's bounds; None if a field's type has no such check."""
    checks: list[UnchangedCheck] = []
    for field in schema:
        kind, bounds = field.type, None
        if pat.is_integer(kind):
            bits, signed = kind.bit_width, pat.is_signed_integer(kind)
            kinds: set[type] = {int}
            bounds = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
        elif pat.is_float64(kind):
            kinds = {float}
        elif pat.is_boolean(kind):
            kinds = {bool}
        elif pat.is_string(kind) or pat.is_large_string(kind):
            kinds = {str}
        elif pat.is_binary(kind) or pat.is_large_binary(kind):
            kinds = {bytes}
        else:
            return None
        if field.nullable:
            kinds.add(NoneType)
        checks.append((itemgetter(field.name), frozenset(kinds), bounds))
    return checks


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
    context: OperatorContext
    output: Output

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
