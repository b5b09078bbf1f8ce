"""DataFrame sources: a DataFrame's partitions read in place as source subtasks."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.plan.graph import Transformation
from flintlock.core.sources.source import Source, SourceReader

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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


def partition_count(frame: DataFrame) -> int | None:
    """How many partitions a job's stage reads ``frame`` in, planned as the job plans it
    (AQE off), without running it; None where the client cannot say (Spark Connect).

    Counted once per job (its run's graph), never kept across jobs: the same DataFrame of
    a catalog table lists other files after a ``REFRESH TABLE``, and a stale count would
    plan the wrong number of source subtasks."""
    if getattr(frame, "_jdf", None) is None:
        return None
    with adaptive_execution_off(frame.sparkSession):
        # a new query (planned under the job's settings) in one py4j call: an alias
        # changes no partitioning; ``select("*")`` took nine calls
        planned = frame._jdf.alias("flintlock_source")
        return int(planned.queryExecution().toRdd().getNumPartitions())


def source_frame(
    frame: DataFrame, parallelism: int | None, default_parallelism: int, max_parallelism: int
) -> tuple[DataFrame, int]:
    """The DataFrame a source stage reads and its number of subtasks.

    Read in place (a subtask per partition, no shuffle) unless ``parallelism`` asks for
    another count, the frame has no partitions, or Spark cannot count them (Connect): then
    ``repartition`` to ``parallelism`` or, if not given, ``default_parallelism``. A frame
    with more partitions than ``max_parallelism`` is coalesced to it (still no shuffle).
    """
    partitions = partition_count(frame)
    if parallelism is None and partitions:
        if partitions > max_parallelism:
            return frame.coalesce(max_parallelism), max_parallelism
        return frame, partitions
    wanted = parallelism or default_parallelism
    if partitions == wanted:
        return frame, wanted
    return frame.repartition(wanted), wanted


def with_source_partitions(transformation: Transformation, max_parallelism: int) -> Transformation:
    """The transformation as a job runs it now: a DataFrame source with its frame as read
    and its subtask count, counted when the job starts (the frame's plan may depend on
    settings made after ``from_dataframe``)."""
    if transformation.spark_source is None or transformation.spark_source.isStreaming:
        return transformation  # a streaming frame is read per micro-batch
    asked = None if transformation.parallelism_from_partitions else transformation.parallelism
    frame, subtasks = source_frame(
        transformation.spark_source, asked, transformation.parallelism, max_parallelism
    )
    return dataclasses.replace(transformation, spark_source=frame, parallelism=subtasks)


_counter: ThreadPoolExecutor | None = None
_counter_lock = threading.Lock()


def _counting_thread() -> ThreadPoolExecutor:
    """One thread per process for partition counts: its py4j connection is made once."""
    global _counter
    with _counter_lock:
        if _counter is None:
            _counter = ThreadPoolExecutor(1, thread_name_prefix="flintlock-partition-count")
        return _counter


class SourcePartitionCounts:
    """A job's transformations with their DataFrame sources counted on a helper thread,
    started before the driver takes the job's lease and reads its folder: Spark plans
    each frame (10-35 ms, bench/RESULTS.md "Fixed cost per job") beside that work.

    Start it where the job's settings hold (AQE off); ``close`` waits for a count still
    running, so that no count outlives them."""

    def __init__(self, transformations: Sequence[Transformation], max_parallelism: int) -> None:
        self._transformations = list(transformations)
        self._counts: dict[int, Future[Transformation]] = {}
        for index, transformation in enumerate(self._transformations):
            if transformation.spark_source is not None:
                self._counts[index] = _counting_thread().submit(
                    with_source_partitions, transformation, max_parallelism
                )

    def transformations(self) -> list[Transformation]:
        """The transformations as the run plans them; raises what a count raised."""
        return [
            self._counts[index].result() if index in self._counts else transformation
            for index, transformation in enumerate(self._transformations)
        ]

    def close(self) -> None:
        for count in self._counts.values():
            count.cancel()
        wait(self._counts.values())

    def __enter__(self) -> SourcePartitionCounts:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
