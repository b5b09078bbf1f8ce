"""Watermark strategies: how a source derives event time's progress from its records."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class WatermarkStrategy:
    """Bounded out-of-orderness over an integer timestamp column (Flink's default).

    After each batch the watermark is ``max timestamp seen - max_out_of_orderness - 1``.
    """

    timestamp_column: str
    max_out_of_orderness: int = 0

    def watermark_after(self, batch: pa.RecordBatch, previous_max: int | None) -> int | None:
        """The highest timestamp seen so far, including ``batch`` (one compute call)."""
        if batch.num_rows == 0:
            return previous_max
        batch_max = pc.max(batch.column(self.timestamp_column)).as_py()
        if batch_max is None:
            return previous_max
        return batch_max if previous_max is None else max(previous_max, batch_max)

    def watermark_for(self, max_timestamp: int) -> int:
        """The watermark once ``max_timestamp`` has been seen."""
        return max_timestamp - self.max_out_of_orderness - 1
