"""keyed batch process: a KeyedBatchProcessFunction over whole batches of a keyed stream.

The fast path for keyed work: one Python call per batch, with every row's key as an Arrow
array, instead of one per record. Since no per-record ``set_current_key`` runs to check
each key, the whole batch's key groups are checked at once against the subtask's own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from flintlock import (
    KeyedBatchContext,
    KeyedBatchProcessFunction,
    KeySelector,
    OneInputStreamOperator,
    hookimpl,
)
from flintlock.operators.process import as_key_selector
from flintlock.plugin_api import UdfOperatorMixin, conform_batch, key_groups_of, keys_to_arrow


class KeyedBatchProcessOperator(
    UdfOperatorMixin[KeyedBatchProcessFunction], OneInputStreamOperator
):
    """Calls ``process_batch(batch, keys, ctx)`` once per batch and ``on_timers`` once per
    watermark that fired timers, and emits what they return; ``output_schema`` (or the
    function's) is enforced on every output batch."""

    def __init__(
        self,
        function: KeyedBatchProcessFunction,
        key_column: str | Sequence[str] | None = None,
        key_selector: KeySelector | Callable[[dict[str, Any]], Any] | None = None,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__(name or "keyed_batch_process")
        key = key_selector if key_selector is not None else key_column
        if key is None:
            raise ValueError("a keyed batch process operator needs key_column or key_selector")
        self.function = function
        self.key_selector: KeySelector = as_key_selector(key)
        self.key_column = key_column if isinstance(key_column, str) else None
        declared = output_schema or getattr(function, "output_schema", None)
        self.output_schema: pa.Schema | None = declared

    def open(self) -> None:
        self._ctx = KeyedBatchContext(self)
        self._fired: list[tuple[int, Any]] = []
        super().open()

    def on_event_time(self, timestamp: int, key: Any) -> None:
        self._fired.append((timestamp, key))  # handed over together in after_timers

    def after_timers(self) -> None:
        if not self._fired:
            return
        fired, self._fired = self._fired, []
        stamps = pa.array([stamp for stamp, _ in fired], pa.int64())
        keys = keys_to_arrow([key for _, key in fired], "timer keys")
        self._emit(self.function.on_timers(stamps, keys, self._ctx))

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        keys = self.key_selector.key_array(batch)
        if keys is None:
            keys = keys_to_arrow(self.key_selector.keys(batch), "keys")
        self._check_key_groups(keys)
        self._emit(self.function.process_batch(batch, keys, self._ctx))

    def _emit(self, out: pa.RecordBatch | None) -> None:
        if out is None:
            return
        if self.output_schema is not None:
            out = conform_batch(out, self.output_schema, self.name)
        if out.num_rows:
            self.output.emit(out)

    def _check_key_groups(self, keys: pa.Array) -> None:
        """Every key must be in this subtask's key groups (as set_current_key checks)."""
        backend = self.context.keyed_backend
        assert backend is not None
        groups = key_groups_of(keys, backend.max_parallelism)
        owned = backend.key_groups
        outside = np.flatnonzero((groups < owned.start) | (groups >= owned.stop))
        if len(outside):
            first = int(outside[0])
            raise ValueError(
                f"key {keys[first].as_py()!r} is in key group {int(groups[first])}, not in "
                f"this subtask's {owned.start}..{owned.stop - 1}"
            )


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("keyed_batch_process", KeyedBatchProcessOperator)
