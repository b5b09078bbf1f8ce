"""How many subtasks a DataFrame source runs: its frame's partitions, counted once per run
under the run's settings, or taken from the run's own query.

Counting plans the frame, and the epoch's action then plans it again inside the job's
query (bench/RESULTS.md, "The 1,000-row job planned once"). Two ways keep that off a
job's path:

- a run whose source stage is its only stage, over its only DataFrame source, starts
  from a count and checks it in the epoch's own query, which the action then runs with
  the plan made for the check (``planned_partitions``): the frame is planned once. The
  count is the one an earlier run in this process found for the same frame or, for a
  frame never counted here, the subtasks the source asks for by default (most frames
  have the session's default parallelism). A count that does not hold is replaced by
  the partitions the check found (or counted again where the checked query did not read
  the frame in place) and the graph built anew before anything runs;
- any other run counts on a helper thread from the job's start, while the driver takes
  the lease and reads the job's folder (``SourcePartitionCounts``).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any

from flintlock.core.plan.graph import JobGraph, Transformation, build_job_graph
from flintlock.core.spark.helper_threads import helper_thread
from flintlock.core.spark.sources import adaptive_execution_off

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_counted: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""The last count of each DataFrame object in this process: where a run starts, never
trusted without the check in the run's own query."""


def partition_count(frame: DataFrame) -> int | None:
    """How many partitions a job's stage reads ``frame`` in, planned as the job plans it
    (AQE off), without running it; None where the client cannot say (Spark Connect).

    Counted anew for every run that does not check its count in its own query: the same
    DataFrame of a catalog table lists other files after a ``REFRESH TABLE``, and a
    stale count would plan the wrong number of source subtasks."""
    if getattr(frame, "_jdf", None) is None:
        return None
    with adaptive_execution_off(frame.sparkSession):
        # a new query (planned under the job's settings) in one py4j call: an alias
        # changes no partitioning, and takes fewer calls than ``select("*")``
        planned = frame._jdf.alias("flintlock_source")
        count = int(planned.queryExecution().toRdd().getNumPartitions())
    _counted[frame] = count
    return count


def planned_partitions(frame: DataFrame) -> int:
    """The partitions of ``frame``'s own query, planned now; an action on the same
    DataFrame object runs that plan (a Dataset plans once), so checking costs no second
    planning."""
    return int(frame._jdf.queryExecution().toRdd().getNumPartitions())


def source_frame(
    frame: DataFrame,
    parallelism: int | None,
    default_parallelism: int,
    max_parallelism: int,
    partitions: int | None,
) -> tuple[DataFrame, int]:
    """The DataFrame a source stage reads and its number of subtasks, for a frame of
    ``partitions`` partitions (None: not known, as over Spark Connect).

    Read in place (a subtask per partition, no shuffle) unless ``parallelism`` asks for
    another count, the frame has no partitions, or Spark cannot count them (Connect): then
    ``repartition`` to ``parallelism`` or, if not given, ``default_parallelism``. A frame
    with more partitions than ``max_parallelism`` is coalesced to it (still no shuffle).
    """
    if parallelism is None and partitions:
        if partitions > max_parallelism:
            return frame.coalesce(max_parallelism), max_parallelism
        return frame, partitions
    wanted = parallelism or default_parallelism
    if partitions == wanted:
        return frame, wanted
    return frame.repartition(wanted), wanted


def with_partitions(
    transformation: Transformation, max_parallelism: int, partitions: int | None
) -> Transformation:
    """The DataFrame source ``transformation`` reading a frame of ``partitions``."""
    asked = None if transformation.parallelism_from_partitions else transformation.parallelism
    frame, subtasks = source_frame(
        transformation.spark_source, asked, transformation.parallelism, max_parallelism, partitions
    )
    return dataclasses.replace(transformation, spark_source=frame, parallelism=subtasks)


def with_source_partitions(transformation: Transformation, max_parallelism: int) -> Transformation:
    """The transformation as a job runs it now: a DataFrame source with its frame as read
    and its subtask count, counted when the job starts (the frame's plan may depend on
    settings made after ``from_dataframe``)."""
    if transformation.spark_source is None or transformation.spark_source.isStreaming:
        return transformation  # a streaming frame is read per micro-batch
    count = partition_count(transformation.spark_source)
    return with_partitions(transformation, max_parallelism, count)


class SourcePartitionCounts:
    """A job's transformations with their DataFrame sources counted on a helper thread,
    started before the driver takes the job's lease and reads its folder: Spark plans
    each frame beside that work.

    A run whose only stage reads its only DataFrame source starts from a count instead
    (``checked_graph``: the graph built from it) and checks it in its own query
    (``core/job/run_start.py``): the count of an earlier run in this process, or the
    source's default subtasks for a frame never counted here. ``may_start_from_count``:
    False where the run cannot check (a restore, Spark Connect).

    Start it where the job's settings hold (AQE off); ``close`` waits for a count still
    running, so that no count outlives them."""

    def __init__(
        self,
        transformations: Sequence[Transformation],
        max_parallelism: int,
        may_start_from_count: bool = True,
    ) -> None:
        self._transformations = list(transformations)
        self.max_parallelism = max_parallelism
        self._counts: dict[int, Future[Transformation]] = {}
        self._checked: dict[int, Transformation] = {}
        """The source that starts from a count to check, by its index (one at most)."""
        self.checked_graph: JobGraph | None = None
        """The graph built from that count, which the run checks in its own query."""
        reading = [i for i, t in enumerate(self._transformations) if t.spark_source is not None]
        if may_start_from_count and len(reading) == 1:
            self._start_from_a_count(reading[0])
        for index in reading:
            if index not in self._checked:
                self._counts[index] = helper_thread("partition-count").submit(
                    with_source_partitions, self._transformations[index], max_parallelism
                )

    def _start_from_a_count(self, index: int) -> None:
        source = self._transformations[index]
        frame = source.spark_source
        if frame.isStreaming:
            return  # read per micro-batch, never counted
        earlier = _counted.get(frame)
        count = source.parallelism if earlier is None else earlier
        counted = with_partitions(source, self.max_parallelism, count)
        graph = build_job_graph(self._with(index, counted))
        layers = graph.layers()
        if len(layers) != 1 or len(layers[0]) != 1:
            return  # its stage is not the job's only one: counted
        self._checked[index], self.checked_graph = counted, graph

    def _with(self, index: int, transformation: Transformation) -> list[Transformation]:
        return [transformation if i == index else t for i, t in enumerate(self._transformations)]

    def transformations(self) -> list[Transformation]:
        """The transformations as the run plans them; raises what a count raised."""
        return [
            self._counts[index].result()
            if index in self._counts
            else self._checked.get(index, transformation)
            for index, transformation in enumerate(self._transformations)
        ]

    def corrected(self, planned: int) -> list[Transformation]:
        """The transformations with the checked source's count corrected, its check having
        found ``planned`` partitions: those are its frame's own where the checked query
        read the frame in place; otherwise (coalesced, repartitioned) it is counted now."""
        [(index, checked)] = self._checked.items()
        self._checked.clear()
        self.checked_graph = None
        source = self._transformations[index]
        if checked.spark_source is source.spark_source:
            _counted[source.spark_source] = planned
            counted = with_partitions(source, self.max_parallelism, planned)
        else:
            counted = with_source_partitions(source, self.max_parallelism)
        return self._with(index, counted)  # the job's only DataFrame source: nothing else counted

    def close(self) -> None:
        for count in self._counts.values():
            count.cancel()
        wait(self._counts.values())

    def __enter__(self) -> SourcePartitionCounts:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def source_subtasks(graph: JobGraph) -> int:
    """The subtasks of a one-stage graph's only vertex: its Spark partitions."""
    [[vertex]] = graph.layers()
    return vertex.parallelism
