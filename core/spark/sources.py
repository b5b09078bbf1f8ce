"""DataFrame sources: a DataFrame's partitions read in place as source subtasks.

The DataFrame's partitions feed the source stage's ``mapInArrow`` directly, one partition a
subtask, so its rows reach flintlock as Spark's Arrow batches with no collect and no copy
through the driver. Adaptive execution is switched off for the job (exact exchanges), and
a setting the user chose is put back after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.sources.source import Source, SourceReader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

AQE = "spark.sql.adaptive.enabled"

_partition_input: Iterator[pa.RecordBatch] | None = None
"""The Arrow batches of the partition the current Spark task reads (one task per worker)."""


def bind_partition_input(batches: Iterator[pa.RecordBatch] | None) -> None:
    """Hand the current Spark partition's batches to a DataFrameSource reader."""
    global _partition_input
    _partition_input = batches


class _PartitionReader(SourceReader):
    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._read = 0

    def read(self) -> Iterator[pa.RecordBatch]:
        for batch in self._batches:
            self._read += 1
            if batch.num_rows:
                yield batch

    def positions(self) -> dict[str, int]:
        return {"partition": self._read}


class DataFrameSource(Source):
    """Reads a Spark DataFrame: each of its partitions is one subtask's input (bounded)."""

    name = "dataframe"

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        if _partition_input is None:
            raise RuntimeError("a DataFrameSource reads only inside a flintlock Spark stage")
        return _PartitionReader(_partition_input)


@contextlib.contextmanager
def session_setting(
    spark: SparkSession, key: str, value: str, only_over: tuple[str | None, ...] | None = None
) -> Iterator[None]:
    """Set the SQL setting ``key`` to ``value`` inside, unless it holds ``value`` already
    or (given ``only_over``) a value not in ``only_over``: a choice of the user's that
    stands. The previous value is restored after."""
    previous = spark.conf.get(key, None)
    if previous == value or (only_over is not None and previous not in only_over):
        yield  # nothing to set, nothing to undo
        return
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def adaptive_execution_off(spark: SparkSession) -> contextlib.AbstractContextManager[None]:
    """Switch AQE off for the job (exact exchanges, faster epochs); restore the user's value."""
    return session_setting(spark, AQE, "false")


ARROW_BATCH_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"
SPARK_ARROW_BATCH_ROWS = "10000"
"""Spark's default rows per Arrow batch to a Python task."""
JOB_ARROW_BATCH_ROWS = "65536"
"""Rows per Arrow batch in a flintlock job: what the exchange gathers before framing
(``core/exchange/writer.py``); fewer, larger batches cut each source subtask's per-batch
work in Spark and in Python (bench/RESULTS.md, "Issue 23 and W4 on a quiet machine")."""


def larger_arrow_batches(spark: SparkSession) -> contextlib.AbstractContextManager[None]:
    """Spark's Arrow batches at ``JOB_ARROW_BATCH_ROWS`` rows for the job, unless the user
    chose a size of their own (any but Spark's default); restored at the end."""
    return session_setting(
        spark, ARROW_BATCH_ROWS, JOB_ARROW_BATCH_ROWS, only_over=(None, SPARK_ARROW_BATCH_ROWS)
    )
