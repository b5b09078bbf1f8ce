"""Runs a WatermarkStrategy where batches enter event time: at a source's head, or in the
operator of ``assign_timestamps_and_watermarks``.

One emitter serves both places, so a strategy behaves the same wherever it is set; it
calls the generator once per batch, never per record, and only moves watermarks forward."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from flintlock.core.api.watermark_generators import WatermarkOutput
from flintlock.core.api.watermarks import WatermarkStrategy, event_time_millis
from flintlock.core.errors import EventTimeError
from flintlock.core.events import MIN_TIMESTAMP
from flintlock.core.runtime.processing_time import Clock

_NO_TIMESTAMPS = pa.array([], pa.int64())


class WatermarkEmitter:
    """Passes each batch on, then runs the generator over it: ``on_event``, then the
    periodic emit (after each batch, each ``interval_rows`` slice, or once
    ``interval_millis`` passed). Watermarks only move forward; idleness changes are
    passed on as a status before (active) or after (idle) the watermark."""

    def __init__(
        self,
        strategy: WatermarkStrategy,
        clock: Clock,
        emit_batch: Callable[[pa.RecordBatch], None],
        emit_watermark: Callable[[int], None],
        emit_status: Callable[[bool], None],
        where: str,
    ) -> None:
        self.strategy = strategy
        self.generator = strategy.create_generator(clock)
        self.output = WatermarkOutput()
        self.clock = clock
        self.current = MIN_TIMESTAMP
        self.idle = False
        self._emit_batch, self._emit_watermark, self._emit_status = (
            emit_batch,
            emit_watermark,
            emit_status,
        )
        self._where = where
        self._last_periodic = clock()

    def process(self, batch: pa.RecordBatch) -> None:
        """Pass ``batch`` on (in ``interval_rows`` slices if set) with its watermarks."""
        rows = self.strategy.interval_rows
        if rows is not None and batch.num_rows > rows:
            for offset in range(0, batch.num_rows, rows):
                self._step(batch.slice(offset, rows))
        else:
            self._step(batch)

    def _step(self, batch: pa.RecordBatch) -> None:
        self._emit_batch(batch)
        self.generator.on_event(batch, self._timestamps(batch), self.output)
        millis = self.strategy.interval_millis
        if millis is None:
            self.generator.on_periodic_emit(self.output)
        else:
            now = self.clock()
            if now - self._last_periodic >= millis:
                self._last_periodic = now
                self.generator.on_periodic_emit(self.output)
        self._apply()

    def _apply(self) -> None:
        output = self.output
        if self.idle and not output.idle:
            self.idle = False
            self._emit_status(False)
        if output.watermark > self.current:
            self.current = output.watermark
            self._emit_watermark(output.watermark)
        if output.idle and not self.idle:
            self.idle = True
            self._emit_status(True)

    def _timestamps(self, batch: pa.RecordBatch) -> pa.Array:
        column = self.strategy.timestamp_column
        if column is None:
            return _NO_TIMESTAMPS
        index = batch.schema.get_field_index(column)
        if index < 0:
            raise EventTimeError(
                f"{self._where}: the WatermarkStrategy's timestamp column '{column}' is not in "
                f"the batch; its columns are {batch.schema.names}"
            )
        stamps = event_time_millis(batch.column(index), column)
        return stamps if stamps.type == pa.int64() else stamps.cast(pa.int64())
