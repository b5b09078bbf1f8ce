"""The Spark stages of an epoch as one DataFrame, and the stages that jobs of a process
share (``core/spark/epoch_frames.py``).

Shared stages hold no plan: their functions read it from the epoch's local property, so
jobs that read the same source DataFrames in the same stage widths run the same stages.
They are kept per process, the most recently used first, and built where a job first
asks for them: building them ahead on a helper thread while the driver takes the job's
lease gains nothing (the driver reaches them first, and the threads share the GIL:
bench/RESULTS.md, "The 1,000-row job on a new DataFrame").
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from functools import reduce
from typing import TYPE_CHECKING, Any

from flintlock.core.exchange.messages import MESSAGE_DDL
from flintlock.core.spark.stage import StageFunction

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from flintlock.core.plan.execution import ExecutionPlan

StageSource = tuple[Any, int]
"""A source stage's input: its DataFrame (None: ``spark.range`` of its subtasks) and its
subtasks."""

SHARED_STAGES_KEPT = 8
"""Shared stages kept per process, the most recently used; each holds its source
DataFrames."""


@functools.cache
def message_type() -> Any:
    """The stages' output type as a StructType, parsed once per process: handed the DDL
    string, each ``mapInArrow`` call would parse it again through py4j (bench/RESULTS.md,
    "Fixed cost per job and per epoch")."""
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(MESSAGE_DDL)


def stage_sources(plan: ExecutionPlan) -> tuple[list[StageSource], list[int]]:
    """What ``plan``'s stages are built from: its source stage's inputs, then the width
    of each later stage (its exact exchange's partitions)."""
    layers = plan.graph.layers()
    sources = [(v.transformations[0].spark_source, v.parallelism) for v in layers[0]]
    return sources, plan.stage_widths[1 : len(layers)]


def build_stages(
    spark: SparkSession,
    sources: Sequence[StageSource],
    widths: Sequence[int],
    plan: ExecutionPlan | None,
    epoch_from_task: bool = True,
) -> DataFrame:
    """The source stage (a ``mapInArrow`` per source, in union) and a stage per width
    after an exact exchange. The functions hold ``plan`` (None: shared stages); with
    ``epoch_from_task`` they read the epoch's part from the job's local property."""
    schema = message_type() if epoch_from_task else MESSAGE_DDL  # Spark Connect: the DDL
    frames = []
    for frame, subtasks in sources:
        read = frame if frame is not None else spark.range(0, subtasks, 1, subtasks)
        frames.append(
            read.mapInArrow(StageFunction(plan, 0, epoch_from_task=epoch_from_task), schema)
        )
    stage = reduce(lambda a, b: a.union(b), frames)
    for index, width in enumerate(widths, start=1):
        stage = stage.repartitionById(width, "route").mapInArrow(
            StageFunction(plan, index, epoch_from_task=epoch_from_task), schema
        )
    return stage  # the driver collects the last stage: only acknowledgements and reports


def shared_stages(
    spark: SparkSession, sources: Sequence[StageSource], widths: Sequence[int]
) -> DataFrame:
    """The process's shared stages for ``sources`` and ``widths``, built once (a job on
    another thread that asks meanwhile waits for the same build)."""
    return _shared(spark, sources, widths).result()


_kept: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], Future[DataFrame]]] = OrderedDict()
_lock = threading.Lock()


def _shared(
    spark: SparkSession, sources: Sequence[StageSource], widths: Sequence[int]
) -> Future[DataFrame]:
    # a DataFrame source's subtasks change nothing in its stage; a range's make it
    frames = tuple(frame for frame, _ in sources)
    key = (
        id(spark),
        tuple(id(f) if f is not None else ("range", n) for f, n in sources),
        tuple(widths),
    )
    with _lock:
        kept = _kept.get(key)
        if kept is not None and all(a is b for a, b in zip(kept[0], frames, strict=True)):
            _kept.move_to_end(key)
            return kept[1]
        built: Future[DataFrame] = Future()
        _kept[key] = (frames, built)
        while len(_kept) > SHARED_STAGES_KEPT:
            _kept.popitem(last=False)

    try:
        built.set_result(build_stages(spark, sources, widths, None))
    except BaseException as error:  # handed to whoever waits; the next one builds
        with _lock:
            if _kept.get(key, (None, None))[1] is built:
                del _kept[key]
        built.set_exception(error)
    return built
