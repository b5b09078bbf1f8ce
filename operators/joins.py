"""Joins of two keyed streams on event time: the interval join and the window join.

Both buffer each side's rows in keyed MapState (by timestamp, or by window start) and
drop them with event-time timers once no future row can match, so the buffers are
snapshotted, restored and rescaled like any keyed state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flintlock import (
    Function,
    JoinContext,
    KeySelector,
    MapStateDescriptor,
    ProcessJoinFunction,
    TimeWindow,
    TwoInputStreamOperator,
    WindowAssigner,
    hookimpl,
)
from flintlock.errors import WindowError
from flintlock.plugin_api import Row, RowOutputMixin, UdfOperatorMixin, event_times, rows_of

Sides = tuple[KeySelector, KeySelector]


class _KeyedTwoInputJoin(RowOutputMixin, UdfOperatorMixin[Function], TwoInputStreamOperator):
    """Shared by the joins: per-side keys and event times, output rows as batches."""

    def __init__(
        self,
        function: Any,
        keys: Sides,
        timestamp_columns: tuple[str, str],
        name: str,
        output_schema: pa.Schema | None,
    ) -> None:
        super().__init__(name)
        self.function = function if isinstance(function, Function) else Function()
        self.key_selectors = keys
        self.key_selector = keys[0]
        self.key_column = getattr(keys[0], "column", None)
        self.timestamp_columns = timestamp_columns
        self._start_rows(name, output_schema)

    def process_batch1(self, batch: pa.RecordBatch) -> None:
        self._rows(batch, 0)

    def process_batch2(self, batch: pa.RecordBatch) -> None:
        self._rows(batch, 1)

    def _rows(self, batch: pa.RecordBatch, side: int) -> None:
        if not batch.num_rows:
            self.emit_empty()
            return
        column = self.timestamp_columns[side]
        stamps = event_times(batch, column)
        keys = self.key_selectors[side].keys(batch)
        set_key = self.context.keyed_backend.set_current_key  # type: ignore[union-attr]
        for row, key, stamp in zip(rows_of(batch), keys, stamps, strict=True):
            if stamp is None:
                raise WindowError(
                    f"join '{self.name}': a row of input {side + 1} has no event time (null "
                    f"in column '{column}'): {row!r}"
                )
            set_key(key)
            self._element(row, key, stamp, side)
        self._flush()

    def _element(self, row: Row, key: Any, timestamp: int, side: int) -> None:
        raise NotImplementedError


class IntervalJoinOperator(_KeyedTwoInputJoin):
    """Joins a left row at t with the right rows in [t + lower, t + upper] (Flink's
    IntervalJoinOperator); rows behind the watermark are late and dropped."""

    function: ProcessJoinFunction

    def __init__(
        self,
        function: ProcessJoinFunction,
        keys: Sides,
        timestamp_columns: tuple[str, str],
        bounds: tuple[int, int],
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__(function, keys, timestamp_columns, name or "interval_join", output_schema)
        self.lower, self.upper = bounds
        self.late_records_dropped = 0
        self._ctx = JoinContext()

    def open(self) -> None:
        super().open()
        keyed_state = self.context.keyed_state
        self._buffers = (
            keyed_state(MapStateDescriptor[int, list[Row]]("left-buffer", pa.int64())),
            keyed_state(MapStateDescriptor[int, list[Row]]("right-buffer", pa.int64())),
        )

    def _element(self, row: Row, key: Any, timestamp: int, side: int) -> None:
        if timestamp < self.current_watermark:
            self.late_records_dropped += 1
            return
        own, other = self._buffers[side], self._buffers[1 - side]
        bucket = own.get(timestamp) or []
        bucket.append(row)
        own.put(timestamp, bucket)
        # the other side's times that match, relative to this row's time
        low, high = (self.lower, self.upper) if side == 0 else (-self.upper, -self.lower)
        ctx, out, process = self._ctx, self._collector, self.function.process_element
        ctx.key = key
        for other_time, others in list(other.items()):
            if timestamp + low <= other_time <= timestamp + high:
                for match in others:
                    left, right = (row, match) if side == 0 else (match, row)
                    ctx.left_timestamp, ctx.right_timestamp = (
                        (timestamp, other_time) if side == 0 else (other_time, timestamp)
                    )
                    process(left, right, ctx, out)
        self.timer_service().register_event_time_timer(self._cleanup_time(timestamp, side))

    def _cleanup_time(self, timestamp: int, side: int) -> int:
        """When no row of the other side can match a row of ``side`` at ``timestamp``."""
        reach = self.upper if side == 0 else -self.lower
        return timestamp + max(reach, 0)

    def on_event_time(self, timestamp: int, key: Any) -> None:
        for side, buffer in enumerate(self._buffers):
            for time in list(buffer.keys()):
                if self._cleanup_time(time, side) <= timestamp:
                    buffer.remove(time)


class WindowJoinOperator(_KeyedTwoInputJoin):
    """Joins every pair of rows with one key in one window when the window fires (Flink's
    window join: a co-group of the two inputs per window, then their cross product)."""

    def __init__(
        self,
        function: Callable[[Row, Row], Row],
        keys: Sides,
        timestamp_columns: tuple[str, str],
        assigner: WindowAssigner,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__(function, keys, timestamp_columns, name or "window_join", output_schema)
        self.join = function
        self.assigner = assigner
        self.late_records_dropped = 0

    def open(self) -> None:
        super().open()
        keyed_state = self.context.keyed_state
        ends = MapStateDescriptor[int, int]("window-ends", pa.int64(), pa.int64())
        self._ends = keyed_state(ends)
        self._sides = (
            keyed_state(MapStateDescriptor[int, list[Row]]("left-windows", pa.int64())),
            keyed_state(MapStateDescriptor[int, list[Row]]("right-windows", pa.int64())),
        )

    def _element(self, row: Row, key: Any, timestamp: int, side: int) -> None:
        added = False
        for window in self.assigner.assign(timestamp):
            if window.max_timestamp() <= self.current_watermark:
                continue  # the window fired already
            added = True
            rows = self._sides[side].get(window.start) or []
            rows.append(row)
            self._sides[side].put(window.start, rows)
            self._ends.put(window.start, window.end)
            self.timer_service().register_event_time_timer(window.max_timestamp())
        if not added:
            self.late_records_dropped += 1

    def on_event_time(self, timestamp: int, key: Any) -> None:
        for start, end in list(self._ends.items()):
            window = TimeWindow(start, end)
            if window.max_timestamp() != timestamp:
                continue
            lefts = self._sides[0].get(start) or []
            rights = self._sides[1].get(start) or []
            join, out = self.join, self._collector.rows
            out.extend(join(left, right) for left in lefts for right in rights)
            for state in (*self._sides, self._ends):
                state.remove(start)


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("interval_join", IntervalJoinOperator)
    register("window_join", WindowJoinOperator)
