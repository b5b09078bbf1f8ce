"""Keyed work a batch at a time: a function that reads and updates the state of every key
of a RecordBatch at once (``ValueState.values`` / ``update_values``, ``ListState``'s
``add_values``), Arrow in and out, with event-time timers fired a watermark at a time.

It exists for keyed work on the fast path: batch-level methods are the fast path and
per-record functions a convenience (CONTRIBUTING.md, "Batch-level keyed state"), so here
no Python call runs per record."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.api.functions import Function
from flintlock.core.api.keys import python_keys

if TYPE_CHECKING:
    from flintlock.core.runtime.operator import StreamOperator


class KeyedBatchContext:
    """What a keyed batch function may use besides its batch: event time and timers."""

    __slots__ = ("_operator",)

    def __init__(self, operator: StreamOperator) -> None:
        self._operator = operator

    def current_watermark(self) -> int:
        """The operator's current event-time watermark."""
        return self._operator.current_watermark

    def register_event_time_timers(
        self, keys: pa.Array | pa.ChunkedArray, timestamps: pa.Array | pa.ChunkedArray
    ) -> None:
        """A timer for ``keys[i]`` at event time ``timestamps[i]`` (ms), each distinct pair
        once (as Flink's timers); they fire in ``on_timers`` once the watermark reaches
        them. One Python step per row: pass each key once where you can."""
        if len(keys) != len(timestamps):
            raise ValueError(f"{len(keys)} keys but {len(timestamps)} timer timestamps")
        timers = self._operator.timer_service()
        stamps = timestamps.cast(pa.int64()).to_pylist()  # a timestamp[ms] gives its ms
        for key, stamp in dict.fromkeys(zip(python_keys(keys), stamps, strict=True)):
            timers.register_event_time_timer_for(key, stamp)


class KeyedBatchProcessFunction(Function):
    """Processes a keyed stream a batch at a time (``key_by(...).process_batch(fn)``).

    State comes from ``self.runtime_context`` as for per-record functions; use its
    batch-level methods (``state.values(keys)``, ``state.update_values(keys, values)``)
    so that no Python call runs per record."""

    def process_batch(
        self, batch: pa.RecordBatch, keys: pa.Array, ctx: KeyedBatchContext
    ) -> pa.RecordBatch | None:
        """The output for one batch (None: nothing); ``keys`` holds each row's key (a
        struct array for a tuple key), all of this subtask's key groups."""
        raise NotImplementedError(f"{type(self).__name__} must override process_batch")

    def on_timers(
        self, timestamps: pa.Array, keys: pa.Array, ctx: KeyedBatchContext
    ) -> pa.RecordBatch | None:
        """The output for the event-time timers that fired together (for one watermark, in
        time order): ``timestamps[i]`` of ``keys[i]``. A function that registers timers
        overrides it."""
        raise NotImplementedError(
            f"{type(self).__name__} registers event-time timers but does not override on_timers"
        )
