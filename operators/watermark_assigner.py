"""assign_timestamps_and_watermarks: a WatermarkStrategy mid-stream (Flink's
TimestampsAndWatermarksOperator). It replaces event time from upstream with its own:
upstream watermarks and idleness are dropped, except MAX_WATERMARK at the end of input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flintlock import OneInputStreamOperator, Watermark, WatermarkStrategy, hookimpl
from flintlock.plugin_api import MAX_TIMESTAMP, WatermarkEmitter


class TimestampsAndWatermarksOperator(OneInputStreamOperator):
    """Passes batches on and emits the watermarks its strategy generates from them."""

    def __init__(self, strategy: WatermarkStrategy, name: str | None = None) -> None:
        super().__init__(name or "timestamps_watermarks")
        self.strategy = strategy
        self._emitter: WatermarkEmitter | None = None

    def open(self) -> None:
        self._emitter = WatermarkEmitter(
            self.strategy,
            self.context.processing_time.clock,  # type: ignore[union-attr]
            lambda batch: self.output.emit(batch),
            self._emit_watermark,
            lambda idle: self.output.emit_watermark_status(idle),
            f"operator '{self.name}'",
        )

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self._emitter.process(batch)  # type: ignore[union-attr]

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        """Upstream event time is replaced; only the end of input (MAX) passes."""
        if watermark.timestamp == MAX_TIMESTAMP:
            self._emit_watermark(MAX_TIMESTAMP)

    def process_watermark_status(self, idle: bool, input_index: int = 1) -> None:
        """Upstream idleness is replaced by the strategy's own (``with_idleness``)."""

    def _emit_watermark(self, timestamp: int) -> None:
        if timestamp > self.current_watermark:
            self.current_watermark = timestamp
            self.output.emit_watermark(Watermark(timestamp))


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("timestamps_and_watermarks", TimestampsAndWatermarksOperator)
