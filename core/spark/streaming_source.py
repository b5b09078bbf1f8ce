"""A source over a Spark Structured Streaming DataFrame: its micro-batches are epochs.

The job runs as a streaming query (``writeStream.foreachBatch``) whose every micro-batch
is one flintlock epoch over the batch's rows, ending in checkpoint
``base + batch_id + 1``. Spark's offset log (in ``<job folder>/spark-offsets``) and
flintlock's checkpoints then agree after a crash: Spark replays the batch it had not
marked done with the same id and the same rows; if flintlock's checkpoint of that batch
had completed, the batch is only committed (idempotently), never run twice.
"""

from __future__ import annotations

from typing import Any

from flintlock.core.sources.source import Source, SourceReader
from flintlock.core.spark.sources import DataFrameSource


class StreamingDataFrameSource(Source):
    """Reads the micro-batches of a streaming DataFrame, one per epoch (any Spark
    streaming source: rate, files, Kafka...); Spark's offsets are its state."""

    name = "spark-stream"
    bounded = False

    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[Any]
    ) -> SourceReader:
        """The rows of this subtask's partition of the epoch's micro-batch."""
        return DataFrameSource().create_reader(subtask_index, parallelism, {})

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        raise TypeError("a streaming DataFrame is read micro-batch by micro-batch (epochs)")
