"""The keyed event-time window operator (Flink's WindowOperator), on keyed state and timers.

Per key, each live window's contents (a reduced row, an aggregate's accumulator, or the
rows a ProcessWindowFunction will see) are kept in keyed MapState under the window's
start, with its end beside it, so they are snapshotted, restored and rescaled like any
keyed state. Event-time timers at a window's last millisecond fire it; a second timer at
that time plus the allowed lateness drops its contents. Rows for windows already past
the allowed lateness are late: sent to the late-data side output if one is asked for,
else dropped and counted.

Tumbling and sliding windows under the default trigger take a batch at a time: rows are
grouped by (key, window) with numpy (window_groups.py), so each group costs one state read
and write and one timer registration, and the function's add is the only call per row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from flintlock import (
    EventTimeTrigger,
    Function,
    KeySelector,
    MapStateDescriptor,
    OneInputStreamOperator,
    OutputTag,
    ProcessingTimeTrigger,
    TimerService,
    TimeWindow,
    Trigger,
    WindowAssigner,
    WindowContext,
    hookimpl,
)
from flintlock.errors import WindowError
from flintlock.operators.window_groups import BatchGroups, group_batch, window_shape
from flintlock.plugin_api import (
    AggregateContents,
    Row,
    RowOutputMixin,
    UdfOperatorMixin,
    WindowContents,
    event_times,
    rows_of,
)


class WindowOperator(RowOutputMixin, UdfOperatorMixin[Function], OneInputStreamOperator):
    """Keyed event-time windows: assign, add, fire on the trigger, drop after lateness."""

    def __init__(
        self,
        assigner: WindowAssigner,
        contents: WindowContents[Any, Any],
        key_selector: KeySelector,
        timestamp_column: str | None,
        trigger: Trigger | None = None,
        allowed_lateness: int = 0,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
        late_tag: OutputTag | None = None,
    ) -> None:
        super().__init__(name or "window")
        self.assigner = assigner
        self.contents = contents
        self.function = contents.window_function or Function()
        self.key_selector = key_selector
        self.key_column = getattr(key_selector, "column", None)
        self.timestamp_column = timestamp_column
        self.event_time = assigner.is_event_time
        default_trigger = EventTimeTrigger() if self.event_time else ProcessingTimeTrigger()
        self.trigger = trigger or default_trigger
        self.allowed_lateness = allowed_lateness if self.event_time else 0
        self.late_tag = late_tag
        self.late_records_dropped = 0
        self.batches_grouped = 0  # batches added group by group (see window_groups)
        self._start_rows(self.name, output_schema)
        self._key: Any = None
        self._triggers = TimerService(self)  # what triggers see: timers and time
        default = self.event_time and type(self.trigger) is EventTimeTrigger
        self._shape = window_shape(assigner) if default and timestamp_column else None

    def open(self) -> None:
        super().open()
        keyed_state = self.context.keyed_state
        ends = MapStateDescriptor[int, int]("window-ends", pa.int64(), pa.int64())
        self._ends = keyed_state(ends)
        # the contents are what the window's WindowContents makes of its rows
        self._windows = keyed_state(MapStateDescriptor[int, Any]("window-contents", pa.int64()))
        self._take_contents = self._windows.pop  # a closure over the table (no TTL)

    # ---- rows ----

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            self.emit_empty()
            return
        if self._shape is not None:
            keys = self.key_selector.keys(batch)
            groups = group_batch(
                batch,
                self.timestamp_column,  # type: ignore[arg-type]
                self.key_column,
                keys,
                self._shape,
                self.allowed_lateness,
                self.current_watermark,
            )
            if groups is not None:
                self.batches_grouped += 1
                self._add_groups(groups, batch, keys)
                if groups.late.any():
                    self._late(batch, np.flatnonzero(groups.late).tolist())
                self._flush()
                return
        rows = rows_of(batch)
        if self.event_time:
            stamps = event_times(batch, self.timestamp_column)  # type: ignore[arg-type]
        else:  # processing time: every row of the batch arrives now
            stamps = [self.timer_service().current_processing_time()] * len(rows)
        keys = self.key_selector.keys(batch)
        set_key = self.context.keyed_backend.set_current_key  # type: ignore[union-attr]
        late: list[int] = []
        for index, (row, key, stamp) in enumerate(zip(rows, keys, stamps, strict=True)):
            if stamp is None:
                raise WindowError(
                    f"window '{self.name}': a row has no event time (null in column "
                    f"'{self.timestamp_column}'): {row!r}"
                )
            set_key(key)
            self._key = key
            if not self._add(row, stamp):
                late.append(index)
        if late:
            self._late(batch, late)
        self._flush()

    def _add_groups(self, groups: BatchGroups, batch: pa.RecordBatch, keys: list[Any]) -> None:
        """Add a batch's rows group by group: one state read and write and one timer
        registration per (key, window), none per row (none of the windows fires)."""
        backend = self.context.keyed_backend
        get, put, put_end = self._windows.get, self._windows.put, self._ends.put
        create, add = self.contents.create, self.contents.add
        direct = None  # an AggregateFunction's add, called without the wrapper's call
        if type(self.contents) is AggregateContents:
            direct = self.contents.aggregate.add
        register = self.timer_service().register_event_time_timer_for
        size, lateness = self._shape[0], self.allowed_lateness  # type: ignore[index]
        bounds = groups.bounds
        # each group's rows, in row order: a row is in one group of tumbling windows, so
        # Arrow takes them in that order before the dicts are built (no Python reorder)
        if size == self._shape[1]:  # type: ignore[index]
            ordered = rows_of(batch.take(pa.array(groups.rows, pa.int64())))
        else:
            rows = rows_of(batch)
            ordered = [rows[index] for index in groups.rows]
        members = groups.rows
        group_keys = [keys[members[lo]] for lo in bounds[:-1]]
        backend.check_keys(group_keys)  # type: ignore[union-attr]  # once per batch
        for group, start in enumerate(groups.starts):
            lo, hi = bounds[group], bounds[group + 1]
            key = group_keys[group]
            backend.current_key = key  # type: ignore[union-attr]
            contents = get(start)
            if contents is None:
                contents = create()
                put_end(start, start + size)
            if direct is not None:
                for row in ordered[lo:hi]:
                    contents = direct(row, contents)
            else:
                for row in ordered[lo:hi]:
                    contents = add(contents, row)
            put(start, contents)
            # a set lookup when the timer exists; a window restored behind a watermark that
            # restarted may have lost its firing timer, and Flink registers it again
            register(key, start + size - 1)
            if lateness:
                register(key, start + size - 1 + lateness)

    def _add(self, row: Row, timestamp: int) -> bool:
        """Add ``row`` to its windows; False if every one of them is late."""
        windows = self.assigner.assign(timestamp)
        if self.assigner.merging:
            windows = [self._merge_sessions(windows[0])]
        added = False
        for window in windows:
            if self._is_late(window):
                continue
            added = True
            contents = self._windows.get(window.start)
            if contents is None:
                contents = self.contents.create()
                self._ends.put(window.start, window.end)
            contents = self.contents.add(contents, row)
            self._windows.put(window.start, contents)
            result = self.trigger.on_element(timestamp, window, self._triggers)
            self._act(window, result, contents)
            self._register_cleanup(window)
        if not self.event_time:
            return True
        return added or timestamp + self.allowed_lateness > self.current_watermark

    def _merge_sessions(self, new: TimeWindow) -> TimeWindow:
        """Merge ``new`` with the key's sessions it touches; their contents move to the
        merged window, whose start may differ from each of theirs."""
        merged, parts = new, []
        for start, end in list(self._ends.items()):
            window = TimeWindow(start, end)
            if window.intersects(new):
                merged = merged.cover(window)
                parts.append(window)
        if not parts or parts == [merged]:
            return merged
        combined = self.contents.create()
        for window in parts:
            combined = self.contents.merge(combined, self._windows.get(window.start))
            self._drop(window)
            self.trigger.clear(window, self._triggers)
            self._triggers.delete_event_time_timer(self._cleanup_time(window))
        self._ends.put(merged.start, merged.end)
        self._windows.put(merged.start, combined)
        self.trigger.on_merge(merged, self._triggers)
        return merged

    def _late(self, batch: pa.RecordBatch, rows: list[int]) -> None:
        """Rows too late for every window: to the late-data side output, or counted."""
        if self.late_tag is not None:
            self.output.emit_side(self.late_tag, batch.take(pa.array(rows, pa.int64())))
        else:
            self.late_records_dropped += len(rows)

    # ---- time ----

    def on_event_time(self, timestamp: int, key: Any) -> None:
        if self._shape is not None:
            self._on_fixed_timer(timestamp, key)
        elif self.event_time:
            self._on_timer(timestamp, key, self.trigger.on_event_time)

    def _on_fixed_timer(self, timestamp: int, key: Any) -> None:
        """``_on_timer`` for the default trigger and windows of one size: the window whose
        last millisecond is ``timestamp`` fires, the one whose lateness ends then goes."""
        self._key = key
        size = self._shape[0]  # type: ignore[index]
        start = timestamp + 1 - size
        if not self.allowed_lateness:  # the window fires and goes at once
            contents = self._take_contents(start)
            self._ends.remove(start)
            if contents is not None:
                self._emit(TimeWindow(start, start + size), contents)
            return
        contents = self._windows.get(start)
        if contents is not None:
            self._emit(TimeWindow(start, start + size), contents)
        # the window whose lateness ends now goes; trigger.clear would delete its timer
        # at its last millisecond, which fired already (at or before this one)
        gone = start - self.allowed_lateness
        self._windows.remove(gone)
        self._ends.remove(gone)

    def on_processing_time(self, timestamp: int, key: Any) -> None:
        if not self.event_time:
            self._on_timer(timestamp, key, self.trigger.on_processing_time)

    def _on_timer(self, timestamp: int, key: Any, on_time: Any) -> None:
        self._key = key
        for start, end in self._windows_due(timestamp):
            window = TimeWindow(start, end)
            result = on_time(timestamp, window, self._triggers)
            self._act(window, result, self._windows.get(start))
            if timestamp == self._cleanup_time(window) and self._ends.contains(start):
                self.trigger.clear(window, self._triggers)
                self._drop(window)

    def _windows_due(self, timestamp: int) -> list[tuple[int, int]]:
        """The key's windows that fire or end at ``timestamp``: found by their start when
        windows have one size, else (sessions) among all of the key's windows."""
        size = self.assigner.window_size
        if size is None:
            return list(self._ends.items())
        due = []
        for start in {timestamp + 1 - size, timestamp + 1 - size - self.allowed_lateness}:
            end = self._ends.get(start)
            if end is not None:
                due.append((start, end))
        return due

    def _act(self, window: TimeWindow, result: Any, contents: Any) -> None:
        if result.fires and contents is not None:
            self._emit(window, contents)
        if result.purges:
            self._windows.remove(window.start)

    def _is_late(self, window: TimeWindow) -> bool:
        return self.event_time and self._cleanup_time(window) <= self.current_watermark

    def _cleanup_time(self, window: TimeWindow) -> int:
        return window.max_timestamp() + self.allowed_lateness

    def _register_cleanup(self, window: TimeWindow) -> None:
        if self.event_time:
            self._triggers.register_event_time_timer(self._cleanup_time(window))
        else:
            self._triggers.register_processing_time_timer(self._cleanup_time(window))

    def _drop(self, window: TimeWindow) -> None:
        self._windows.remove(window.start)
        self._ends.remove(window.start)

    # ---- output ----

    def _emit(self, window: TimeWindow, contents: Any) -> None:
        results = self.contents.results(contents)
        function = self.contents.window_function
        if function is not None:
            function.process(self._key, WindowContext(self, window), results, self._collector)
            return
        for result in results:
            if not isinstance(result, dict):
                raise WindowError(
                    f"window '{self.name}': the window's result {result!r} is not a row (a "
                    f"dict); return one, or pass a ProcessWindowFunction to build it"
                )
            self._collector.rows.append(result)


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("window", WindowOperator)
