"""Watermark generators (Flink's WatermarkGenerator), called once per batch, not per record.

``on_event(batch, timestamps, output)`` sees a batch and its event times (an int64 array,
epoch ms for a timestamp column) and may emit at once (punctuated watermarks);
``on_periodic_emit(output)`` runs after it, as often as the strategy's interval says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.events import MIN_TIMESTAMP

if TYPE_CHECKING:
    from flintlock.core.runtime.processing_time import Clock


class WatermarkOutput:
    """Where a generator sends watermarks and idleness; watermarks only move forward."""

    __slots__ = ("idle", "watermark")

    def __init__(self) -> None:
        self.watermark = MIN_TIMESTAMP
        self.idle = False

    def emit_watermark(self, timestamp: int) -> None:
        """Event time reached ``timestamp``; a watermark that moves forward marks active."""
        if timestamp > self.watermark:
            self.watermark = timestamp
            self.idle = False

    def mark_idle(self) -> None:
        """No rows for a while: leave the watermark min downstream until active again."""
        self.idle = True

    def mark_active(self) -> None:
        """Rows flow again: count in the watermark min downstream."""
        self.idle = False


class WatermarkGenerator:
    """Generates watermarks from the batches a subtask reads. Override either method."""

    def on_event(
        self, batch: pa.RecordBatch, timestamps: pa.Array, output: WatermarkOutput
    ) -> None:
        """One batch was passed on; ``timestamps`` are its event times. May emit."""

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """The periodic emit (after each batch by default; see ``with_interval``)."""


class BoundedOutOfOrderness(WatermarkGenerator):
    """Watermark = max timestamp seen - ``delay`` - 1 (monotonous: ``delay`` 0)."""

    def __init__(self, delay: int) -> None:
        self.delay = delay
        self.max_timestamp: int | None = None

    def on_event(
        self, batch: pa.RecordBatch, timestamps: pa.Array, output: WatermarkOutput
    ) -> None:
        if len(timestamps) == 0:
            return
        highest = pc.max(timestamps)
        if highest.is_valid:
            value = highest.as_py()
            if self.max_timestamp is None or value > self.max_timestamp:
                self.max_timestamp = value

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self.max_timestamp is not None:
            output.emit_watermark(self.max_timestamp - self.delay - 1)


class NoWatermarks(WatermarkGenerator):
    """Never emits: event time advances only at the end of the input."""


class WithIdleness(WatermarkGenerator):
    """Marks the output idle once no row came for ``timeout`` ms of processing time
    (checked at each periodic emit), active again with the next rows."""

    def __init__(self, inner: WatermarkGenerator, timeout: int, clock: Clock) -> None:
        self.inner, self.timeout, self.clock = inner, timeout, clock
        self.last_activity = clock()

    def on_event(
        self, batch: pa.RecordBatch, timestamps: pa.Array, output: WatermarkOutput
    ) -> None:
        if batch.num_rows:
            self.last_activity = self.clock()
            output.mark_active()
        self.inner.on_event(batch, timestamps, output)

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self.clock() - self.last_activity >= self.timeout:
            output.mark_idle()
        else:
            self.inner.on_periodic_emit(output)
