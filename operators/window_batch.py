"""Batch-level window aggregation: tumbling or sliding event-time windows over column
aggregates (count, sum, min, max, mean), with Arrow group-bys per batch and no Python
per row (``keyed.window(...).aggregate_columns({...})``).

Open windows are one Arrow table of partial aggregates per (key, window start), merged
by a second group-by; the watermark fires every window it passed in one filter, emitted
in order of (window start, key). At a checkpoint the table goes into keyed ValueState
(one list of windows per key), so it is restored and rescaled by key group like any
keyed state. With ``pre_aggregated`` its input is what window_preaggregate.py sends:
partials of upstream batches (or rows, where those would not be fewer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock import (
    KeySelector,
    OneInputStreamOperator,
    OutputTag,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
    hookimpl,
)
from flintlock.errors import WindowError
from flintlock.plugin_api import event_time_millis, keys_to_arrow, python_keys

START = "window_start"
END = "window_end"
PARTIALS = {
    "count": ("count", "sum"),
    "sum": ("sum", "sum"),
    "min": ("min", "min"),
    "max": ("max", "max"),
}
"""An aggregate's partial function per batch, and how partials of one window merge."""
FUNCTIONS = (*PARTIALS, "mean")
LATEST = "__latest_window_rows"
"""In a pre-aggregated partial: how many of its rows have this window as their latest
(a row is late when its latest window is), so the downstream counts late rows exactly."""


def partial_specs(aggregates: dict[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """(input column, partial function) for each aggregate, once each (mean: sum, count)."""
    partials: list[tuple[str, str]] = []
    for output, (column, function) in aggregates.items():
        if function not in FUNCTIONS:
            raise ValueError(
                f"aggregate_columns: '{output}' uses {function!r}; use one of {FUNCTIONS}"
            )
        for part in ("sum", "count") if function == "mean" else (function,):
            if (column, part) not in partials:
                partials.append((column, part))
    return partials


def window_pairs(
    batch: pa.RecordBatch, timestamp_column: str, size: int, slide: int, offset: int, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """(row index, window start) of every window of every row, the rows' latest windows
    first (copy 0), then each earlier window of all rows: numpy, no Python per row."""
    column = event_time_millis(batch.column(timestamp_column), timestamp_column)
    if column.null_count:
        raise WindowError(
            f"{where}: {column.null_count} rows have no event time (null "
            f"in column '{timestamp_column}')"
        )
    stamps = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
    last = (stamps - offset) // slide * slide + offset
    copies = size // slide
    rows = np.tile(np.arange(len(stamps)), copies)
    starts = np.concatenate([last - i * slide for i in range(copies)])
    return rows, starts


def merge_partials(
    table: pa.Table, keys: list[str], partials: list[tuple[str, str]], extra: tuple[str, ...] = ()
) -> pa.Table:
    """One row per (key, window start): partial columns merged (sum of counts, min of
    mins ...), ``extra`` columns summed."""
    names = [f"{column}_{part}" for column, part in partials]
    specs = [(name, PARTIALS[part][1]) for name, (_, part) in zip(names, partials, strict=True)]
    specs += [(name, "sum") for name in extra]
    grouped = table.group_by([*keys, START], use_threads=False).aggregate(specs)
    columns = {name: grouped.column(name) for name in (*keys, START)}
    for name, merge in specs:
        columns[name] = grouped.column(f"{name}_{merge}")
    return pa.table(columns)


def aggregate_shape(assigner: Any) -> tuple[int, int, int]:
    """(size, slide, offset) of a tumbling or sliding assigner."""
    if isinstance(assigner, TumblingEventTimeWindows):
        return assigner.size, assigner.size, assigner.offset
    if isinstance(assigner, SlidingEventTimeWindows):
        if assigner.size % assigner.slide:
            raise ValueError(
                f"aggregate_columns: a sliding window's size ({assigner.size}) must be a "
                f"multiple of its slide ({assigner.slide})"
            )
        return assigner.size, assigner.slide, assigner.offset
    raise ValueError(
        f"aggregate_columns: windows must be tumbling, sliding or event-time sessions, "
        f"not {assigner.describe()}"
    )


class ColumnWindowOperator(OneInputStreamOperator):
    """What both halves of ``aggregate_columns`` share: the window shape, the key columns,
    the event-time column and the partial functions, and each row's windows per batch."""

    def __init__(
        self,
        name: str,
        assigner: Any,
        aggregates: dict[str, tuple[str, str]],
        key_selector: KeySelector,
        timestamp_column: str,
    ) -> None:
        super().__init__(name)
        self.size, self.slide, self.offset = self.window_shape(assigner)
        if not key_selector.columns:
            raise ValueError("aggregate_columns needs a key of columns, not a key function")
        self.key_selector = key_selector
        self.key_names = list(key_selector.columns)
        self.timestamp_column = timestamp_column
        self.aggregates = dict(aggregates)
        self._partials = partial_specs(self.aggregates)  # (input column, partial function)

    def window_shape(self, assigner: Any) -> tuple[int, int, int]:
        """(size, slide, offset) of the windows this operator takes (ValueError if none)."""
        return aggregate_shape(assigner)

    def _window_pairs(self, batch: pa.RecordBatch, what: str) -> tuple[np.ndarray, np.ndarray]:
        """(row index, window start) of every window of every row of ``batch``."""
        return window_pairs(
            batch,
            self.timestamp_column,
            self.size,
            self.slide,
            self.offset,
            f"{what} '{self.name}'",
        )


class BatchWindowAggregateOperator(ColumnWindowOperator):
    """Aggregates columns per key and event-time window with Arrow, batch by batch."""

    WINDOW_COLUMNS: tuple[str, ...] = (START,)
    """The columns that name an open window in its state (besides key and partials)."""

    def __init__(
        self,
        assigner: Any,
        aggregates: dict[str, tuple[str, str]],
        key_selector: KeySelector,
        timestamp_column: str,
        name: str | None = None,
        late_tag: OutputTag | None = None,
        pre_aggregated: bool = False,
    ) -> None:
        super().__init__(
            name or "window_aggregate", assigner, aggregates, key_selector, timestamp_column
        )
        self.late_tag = late_tag
        self.key_column = self.key_names[0] if len(self.key_names) == 1 else None
        self.pre_aggregated = pre_aggregated
        if pre_aggregated and late_tag is not None:
            raise ValueError(
                "aggregate_columns: a late-data side output needs the late rows themselves, "
                "so its input cannot be pre-aggregated"
            )
        self._parts: list[pa.Table] = []
        self._unmerged = False
        self._stored_keys: list[Any] = []
        self.late_records_dropped = 0

    def open(self) -> None:
        super().open()
        self._state = self.context.keyed_state(ValueStateDescriptor[object]("window-aggregates"))
        self._late = self.context.metrics.counter("numLateRecordsDropped")  # Flink's name

    # ---- rows ----

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        if self.pre_aggregated and batch.schema.get_field_index(LATEST) >= 0:
            self._process_partials(batch)  # else rows the pre-aggregation passed on
            return
        rows, starts = self._window_pairs(batch, "window")
        live = starts + self.size - 1 > self.current_watermark
        if not live.all():
            late_rows = ~live[: batch.num_rows]  # a row's last window is its latest
            if self.late_tag is not None:
                self.output.emit_side(self.late_tag, batch.filter(pa.array(late_rows)))
            else:
                self._count_late(int(late_rows.sum()))
            rows, starts = rows[live], starts[live]
        if not len(rows):
            return
        indices = pa.array(rows)
        columns = {name: batch.column(name).take(indices) for name in self.key_names}
        columns[START] = pa.array(starts, pa.int64())
        for column_name, _ in self._partials:
            if column_name not in columns:
                columns[column_name] = batch.column(column_name).take(indices)
        table = pa.table(columns)
        grouped = table.group_by([*self.key_names, START], use_threads=False)
        self._parts.append(grouped.aggregate(self._partials))

    def _process_partials(self, batch: pa.RecordBatch) -> None:
        """Partials of the pre-aggregation (one per key and window of an upstream batch):
        judged late by window start as their rows would be, then kept to merge."""
        starts = batch.column(START).to_numpy(zero_copy_only=False)
        live = starts + self.size - 1 > self.current_watermark
        table = pa.Table.from_batches([batch])
        if not live.all():
            latest = batch.column(LATEST).to_numpy(zero_copy_only=False)
            self._count_late(int(latest[~live].sum()))
            table = table.filter(pa.array(live))
            if not table.num_rows:
                return
        self._parts.append(table.drop_columns([LATEST]))
        self._unmerged = True  # partials of many upstream batches: merged at the watermark

    def _count_late(self, rows: int) -> None:
        self.late_records_dropped += rows
        self._late.inc(rows)

    def _merged(self) -> pa.Table | None:
        """Every open window once: the partials of all batches so far, merged."""
        if not self._parts:
            return None
        if len(self._parts) == 1 and not self._unmerged:
            return self._parts[0]
        table = pa.concat_tables(self._parts, promote_options="permissive")
        merged = merge_partials(table, self.key_names, self._partials)
        self._parts, self._unmerged = [merged], False
        return merged

    # ---- time ----

    def after_timers(self) -> None:
        merged = self._merged()
        if merged is None:
            return
        due = pc.less_equal(
            pc.add(merged.column(START), self.size - 1), pa.scalar(self.current_watermark)
        )
        fired = merged.filter(due)
        if fired.num_rows:
            self._parts = [merged.filter(pc.invert(due))]
            order = [(START, "ascending"), *((name, "ascending") for name in self.key_names)]
            self._emit(fired.sort_by(order))

    def _emit(self, fired: pa.Table) -> None:
        columns = {name: fired.column(name) for name in self.key_names}
        columns[START] = fired.column(START)
        columns[END] = self._window_ends(fired)
        for output, (column, function) in self.aggregates.items():
            if function == "mean":
                total = fired.column(f"{column}_sum").cast(pa.float64())
                columns[output] = pc.divide(total, fired.column(f"{column}_count"))
            else:
                columns[output] = fired.column(f"{column}_{function}")
        for batch in pa.table(columns).to_batches():
            self.output.emit(batch)

    def _window_ends(self, fired: pa.Table) -> pa.ChunkedArray:
        """Each fired window's end (exclusive)."""
        return pc.add(fired.column(START), self.size)

    # ---- state ----

    def snapshot_state(self, checkpoint_id: int) -> None:
        super().snapshot_state(checkpoint_id)
        merged = self._merged()
        keys: list[Any] = []
        if merged is not None and merged.num_rows:
            key_array, windows = self._windows_per_key(merged)
            self._state.update_values(key_array, windows)
            keys = python_keys(key_array)
        gone = set(self._stored_keys) - set(keys)
        if gone:
            cleared = keys_to_arrow(list(gone), "window keys")
            self._state.update_values(cleared, pa.nulls(len(cleared)))
        self._stored_keys = keys

    def initialize_state(self) -> None:
        super().initialize_state()
        backend = self.context.keyed_backend
        assert backend is not None, "a keyed operator has a keyed backend"
        try:
            keys = list(backend.state_keys("window-aggregates"))
        except NotImplementedError as error:
            raise WindowError(
                f"window '{self.name}': {error}; aggregate_columns needs it"
            ) from None
        if not keys:
            return
        handle = backend.get_state(ValueStateDescriptor[object]("window-aggregates"))
        windows = handle.values(keys_to_arrow(keys, "window keys")).to_pylist()
        rows: dict[str, list[Any]] = {name: [] for name in self.key_names}
        for key, entries in zip(keys, windows, strict=True):
            parts = key if isinstance(key, tuple) else (key,)
            for entry in entries or []:
                for name, part in zip(self.key_names, parts, strict=True):
                    rows[name].append(part)
                for name, value in entry.items():
                    rows.setdefault(name, []).append(value)
        self._parts = [pa.table(rows)]
        self._stored_keys = keys

    def _windows_per_key(self, merged: pa.Table) -> tuple[pa.Array, pa.Array]:
        """The keys of ``merged`` once each, and each key's windows as a list of structs."""
        ordered = merged.sort_by([(name, "ascending") for name in self.key_names])
        keys = [ordered.column(name).combine_chunks() for name in self.key_names]
        changes = np.zeros(ordered.num_rows, dtype=bool)
        changes[0] = True
        for key in keys:
            values = key.to_numpy(zero_copy_only=False)
            changes[1:] |= values[1:] != values[:-1]
        firsts = np.flatnonzero(changes)
        offsets = pa.array(np.append(firsts, ordered.num_rows), pa.int32())
        names = [*self.WINDOW_COLUMNS, *(f"{column}_{part}" for column, part in self._partials)]
        structs = pa.StructArray.from_arrays(
            [ordered.column(name).combine_chunks() for name in names], names=names
        )
        windows = pa.ListArray.from_arrays(offsets, structs)
        at = pa.array(firsts)
        if len(keys) == 1:
            return keys[0].take(at), windows
        parts = [key.take(at) for key in keys]
        return pa.StructArray.from_arrays(parts, names=[str(i) for i in range(len(parts))]), windows


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("window_aggregate", BatchWindowAggregateOperator)
