"""Batch-level event-time session windows over column aggregates (count, sum, min, max,
mean): ``keyed.window(EventTimeSessionWindows.with_gap(ms)).aggregate_columns({...})``,
with Arrow and numpy per batch and no Python per row.

Flink's session semantics: a row at ``t`` opens the session [t, t + gap); sessions of a
key that overlap or touch merge; a session fires when the watermark reaches its end - 1.
Open sessions are one Arrow table of partial aggregates per (key, start, end). Each
batch's rows join them as intervals: sorted by key then start, a running maximum of the
ends (kept apart per key by an offset of the key's rank) tells where a new session
begins, a cumulative sum numbers the sessions, and one group-by per session merges the
rows' and the open sessions' partials. A row is late, as in Flink, when the session it
merges into has already passed the watermark: it goes to the late side output or is
counted. State, restore and rescale are ``BatchWindowAggregateOperator``'s, with the
session end stored beside the start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock import EventTimeSessionWindows, KeySelector, OutputTag, hookimpl
from flintlock.errors import WindowError
from flintlock.operators.window_batch import END, PARTIALS, START, BatchWindowAggregateOperator
from flintlock.plugin_api import event_time_millis

SESSION = "__session"
"""The session number of each row and open session within one batch's merge."""


def merge_intervals(
    key_columns: list[pa.Array], starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Merge the intervals [start, end) of each key that overlap or touch, numpy only:
    the session number of each interval, and per session its start, its end and the
    index of one of its intervals (to take its key from)."""
    sort_keys = [(str(i), "ascending") for i in range(len(key_columns))]
    table = pa.table({**{str(i): c for i, c in enumerate(key_columns)}, "s": starts})
    order = pc.sort_indices(table, sort_keys=[*sort_keys, ("s", "ascending")]).to_numpy()
    count = len(order)
    key_changes = np.zeros(count, dtype=bool)
    key_changes[:1] = True
    for column in key_columns:
        values = column.take(pa.array(order)).to_numpy(zero_copy_only=False)
        key_changes[1:] |= values[1:] != values[:-1]
    key_rank = np.cumsum(key_changes) - 1
    # ranks of starts and ends together keep their order; an offset per key rank keeps
    # one key's running end from reaching the next key's starts
    ranks = np.unique(np.concatenate([starts, ends]), return_inverse=True)[1]
    span = 2 * count
    sorted_starts = ranks[:count][order] + key_rank * span
    running_ends = np.maximum.accumulate(ranks[count:][order] + key_rank * span)
    begins = np.ones(count, dtype=bool)
    begins[1:] = sorted_starts[1:] > running_ends[:-1]
    numbers = np.empty(count, dtype=np.int64)
    numbers[order] = np.cumsum(begins) - 1
    firsts = np.flatnonzero(begins)
    session_ends = np.maximum.reduceat(ends[order], firsts)
    return numbers, starts[order][firsts], session_ends, order[firsts]


class SessionWindowAggregateOperator(BatchWindowAggregateOperator):
    """Aggregates columns per key and event-time session with Arrow, batch by batch."""

    WINDOW_COLUMNS = (START, END)

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
        if pre_aggregated:
            raise ValueError("aggregate_columns: session windows are not pre-aggregated")
        super().__init__(
            assigner,
            aggregates,
            key_selector,
            timestamp_column,
            name=name or "session_aggregate",
            late_tag=late_tag,
        )
        self.gap = self.size

    def window_shape(self, assigner: Any) -> tuple[int, int, int]:
        if not isinstance(assigner, EventTimeSessionWindows):
            raise ValueError(
                f"aggregate_columns: this operator takes session windows, not {assigner.describe()}"
            )
        return assigner.gap, assigner.gap, 0

    def _open_sessions(self) -> pa.Table | None:
        """The open sessions (key columns, START, END, partials), or None."""
        if not self._parts or not self._parts[0].num_rows:
            return None
        return self._parts[0]

    # ---- rows ----

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        column = event_time_millis(batch.column(self.timestamp_column), self.timestamp_column)
        if column.null_count:
            raise WindowError(
                f"session window '{self.name}': {column.null_count} rows have no event time "
                f"(null in column '{self.timestamp_column}')"
            )
        stamps = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
        open_ = self._open_sessions()
        rows_keys = [batch.column(name) for name in self.key_names]
        if open_ is None:
            keys, starts, ends = rows_keys, stamps, stamps + self.gap
            opened = 0
        else:
            opened = open_.num_rows
            keys = [
                pa.concat_arrays([open_.column(name).combine_chunks().cast(key.type), key])
                for name, key in zip(self.key_names, rows_keys, strict=True)
            ]
            starts = np.concatenate([open_.column(START).to_numpy(), stamps])
            ends = np.concatenate([open_.column(END).to_numpy(), stamps + self.gap])
        numbers, session_starts, session_ends, firsts = merge_intervals(keys, starts, ends)
        row_numbers = numbers[opened:]
        late = session_ends[row_numbers] - 1 <= self.current_watermark
        if late.any():
            if self.late_tag is not None:
                self.output.emit_side(self.late_tag, batch.filter(pa.array(late)))
            else:
                self._count_late(int(late.sum()))
            batch = batch.filter(pa.array(~late))
            row_numbers = row_numbers[~late]
            if not batch.num_rows:
                return
        sessions = {
            name: key.take(pa.array(firsts)) for name, key in zip(self.key_names, keys, strict=True)
        }
        sessions[START] = pa.array(session_starts, pa.int64())
        sessions[END] = pa.array(session_ends, pa.int64())
        self._parts = [self._merge(batch, row_numbers, open_, numbers[:opened], pa.table(sessions))]

    def _merge(
        self,
        batch: pa.RecordBatch,
        row_numbers: np.ndarray,
        open_: pa.Table | None,
        open_numbers: np.ndarray,
        sessions: pa.Table,
    ) -> pa.Table:
        """The open sessions after this batch: the rows' partials per session number,
        merged with those of the open sessions they joined; ``sessions`` holds each
        session number's key columns, START and END."""
        names = [f"{column}_{part}" for column, part in self._partials]
        columns: dict[str, Any] = {SESSION: pa.array(row_numbers, pa.int64())}
        for column_name, _ in self._partials:
            columns.setdefault(column_name, batch.column(column_name))
        parts = pa.table(columns).group_by([SESSION], use_threads=False)
        rows = parts.aggregate(self._partials).select([SESSION, *names])
        if open_ is not None:
            partials = open_.select(names)
            if partials.schema != rows.schema.remove(0):
                partials = partials.cast(rows.schema.remove(0))  # restored from Python
            partials = partials.add_column(0, SESSION, pa.array(open_numbers, pa.int64()))
            rows = pa.concat_tables([partials, rows])
        merges = [
            (name, PARTIALS[part][1]) for name, (_, part) in zip(names, self._partials, strict=True)
        ]
        merged = rows.group_by([SESSION], use_threads=False).aggregate(merges)
        kept = sessions.take(merged.column(SESSION))
        result = {name: kept.column(name) for name in (*self.key_names, START, END)}
        for name, merge in merges:
            result[name] = merged.column(f"{name}_{merge}")
        return pa.table(result)

    # ---- time ----

    def after_timers(self) -> None:
        open_ = self._open_sessions()
        if open_ is None:
            return
        due = pc.less_equal(pc.subtract(open_.column(END), 1), pa.scalar(self.current_watermark))
        fired = open_.filter(due)
        if fired.num_rows:
            self._parts = [open_.filter(pc.invert(due))]
            order = [(START, "ascending"), *((name, "ascending") for name in self.key_names)]
            self._emit(fired.sort_by(order))

    def _window_ends(self, fired: pa.Table) -> pa.ChunkedArray:
        return fired.column(END)


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("window_sessions", SessionWindowAggregateOperator)
