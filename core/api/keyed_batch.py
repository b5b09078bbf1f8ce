"""Keyed work a batch at a time: a function that reads and updates the state of every key
of a RecordBatch at once (``ValueState.values`` / ``update_values``), Arrow in and out.

It exists for keyed work on the fast path: batch-level methods are the fast path and
per-record functions a convenience (CONTRIBUTING.md, "Batch-level keyed state"), so here
no Python call runs per record."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.api.functions import Function

if TYPE_CHECKING:
    from flintlock.core.runtime.operator import StreamOperator


class KeyedBatchContext:
    """What a keyed batch function may read besides its batch: event time."""

    __slots__ = ("_operator",)

    def __init__(self, operator: StreamOperator) -> None:
        self._operator = operator

    def current_watermark(self) -> int:
        """The operator's current event-time watermark."""
        return self._operator.current_watermark


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
