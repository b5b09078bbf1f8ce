"""A regular (unwindowed) inner join of two keyed streams, batch-level and per record,
for Nexmark's q3 and q20: one side has at most one row per key (a person by id, an
auction by id), the other any number (auctions by seller, bids by auction), and either
may come first.

Both forms keep the unique side's row per key for ever, as Flink's regular join keeps
both sides: its state grows with the input. The other side's rows wait in keyed state
only until their key's unique row arrives; rows whose key never arrives (a bid on an
auction of another category) wait for ever."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock import (
    CoProcessFunction,
    DataStream,
    ListStateDescriptor,
    MultipleInputStreamOperator,
    ValueStateDescriptor,
)

KEY = "join_key"
"""The column both inputs are keyed by in the batch form (dropped from the output)."""


class RegularJoin(MultipleInputStreamOperator):
    """Input 1: the unique side, input 2: the other; both carry ``join_key``. Emits each
    match once, as ``output_columns`` of the joined row, whichever side came first."""

    key_column = KEY

    def __init__(self, unique: pa.Schema, other: pa.Schema, output_columns: list[str]) -> None:
        super().__init__(2, name="regular-join")
        self.unique_schema = unique
        self.output_columns = output_columns
        self.waiting_type = pa.struct(other.remove(other.get_field_index(KEY)))

    def open(self) -> None:
        keyed = self.context.keyed_state
        self.unique = keyed(
            ValueStateDescriptor("unique", arrow_type=pa.struct(self.unique_schema))
        )
        self.waiting = keyed(ListStateDescriptor("waiting", arrow_type=self.waiting_type))

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        keys = batch.column(KEY)
        if input_index == 1:
            self.unique.update_values(keys, batch.to_struct_array())  # held as Arrow rows
            waiting = self.waiting.values(keys)
            counts = pc.list_value_length(waiting)
            if pc.sum(counts).as_py():
                earlier = pa.RecordBatch.from_struct_array(waiting.flatten())
                rows = np.repeat(np.arange(len(keys)), counts.to_numpy(zero_copy_only=False))
                self._emit(batch.take(pa.array(rows)), earlier)
                self.waiting.clear_values(keys)
            return
        found = self.unique.values(keys)
        matched = found.is_valid()
        if pc.any(matched).as_py():
            self._emit(_flat(found.filter(matched), self.unique_schema), batch.filter(matched))
        self._wait(batch.filter(pc.invert(matched)))

    def _emit(self, unique: pa.RecordBatch, other: pa.RecordBatch) -> None:
        """Row i of ``unique`` joined with row i of ``other``."""
        columns = {name: unique.column(name) for name in unique.schema.names}
        columns |= {name: other.column(name) for name in other.schema.names}
        chosen = [columns[name] for name in self.output_columns]
        self.output.emit(pa.RecordBatch.from_arrays(chosen, self.output_columns))

    def _wait(self, rows: pa.RecordBatch) -> None:
        """Append ``rows`` (but their key) to their keys' waiting lists."""
        if rows.num_rows:
            waiting = rows.drop_columns([KEY]).to_struct_array()
            self.waiting.add_values(rows.column(KEY), waiting.cast(self.waiting_type))


def _flat(rows: pa.Array, schema: pa.Schema) -> pa.RecordBatch:
    """A struct array's rows as a batch of ``schema``."""
    if len(rows) == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    return pa.RecordBatch.from_struct_array(rows).cast(schema)


def regular_join(
    unique: DataStream, other: DataStream, output_columns: list[str], output_schema: pa.Schema
) -> DataStream:
    """The batch form: both streams need a ``join_key`` column."""
    unique_schema, other_schema = unique.schema, other.schema
    assert unique_schema is not None and other_schema is not None
    joined = unique.key_by(KEY).connect_many(other.key_by(KEY))
    return joined.transform(
        "regular-join",
        lambda: RegularJoin(unique_schema, other_schema, output_columns),
        output_schema=output_schema,
    )


class RegularJoinPerRecord(CoProcessFunction):
    """The per-record form: input 1 the unique side, input 2 the other, keyed alike;
    ``combine(unique_row, other_row)`` makes the output row."""

    def __init__(self, combine: Any) -> None:
        self.combine = combine

    def open(self) -> None:
        self.unique = self.runtime_context.get_state(ValueStateDescriptor("unique"))
        self.waiting = self.runtime_context.get_list_state(ListStateDescriptor("waiting"))

    def process_element1(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.unique.update(value)
        for other in self.waiting.get():
            out.collect(self.combine(value, other))
        self.waiting.clear()

    def process_element2(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        unique = self.unique.value()
        if unique is None:
            self.waiting.add(value)
        else:
            out.collect(self.combine(unique, value))
