"""The DataFrame of a run's epochs, built once per run layout and reused by every epoch.

Building an epoch's stages through py4j (sources, ``mapInArrow`` per stage, exchanges,
the acknowledgement stage) cost 55-90 ms per epoch. The stages differ between epochs of
a run only in the plan's per-epoch part (barrier, restores, source splits), so the frame
is built once; each epoch runs a fresh query over its logical plan (a new physical plan,
so no shuffle output of an earlier epoch is reused; a frame without exchanges runs as it
is) and hands its per-epoch part to the tasks as a Spark local property, which Spark
sends with each task of the epoch's job (``core/spark/run_settings.py``).

The stages themselves are shared between jobs of the process that read the same source
DataFrames in the same stage widths: their functions hold no plan, and each epoch's
local property carries the run's layout too. A job then pays neither ``mapInArrow``'s
py4j calls nor pickling its plan into them (12-13 ms a job, bench/RESULTS.md); each run
still plans a new query over the shared stages, under the settings of the moment (a
query is planned once: a kept one would run a stale plan). A layout whose encoded plan
is over ``SHARED_LAYOUT_LIMIT`` keeps its plan in its own stages' functions instead,
which Spark ships once per stage rather than with every task.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from functools import reduce
from typing import TYPE_CHECKING, Any

from flintlock.core.exchange.messages import MESSAGE_DDL
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.spark.stage import StageFunction
from flintlock.core.spark.task_plan import encoded_layout, with_layout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


SHARED_LAYOUT_LIMIT = 128 * 1024
"""Characters of an encoded layout up to which a run's stages are shared between jobs
(the layout then rides with every task of every epoch)."""
SHARED_STAGES_KEPT = 8
"""Shared stages kept per process, the most recently used; each holds its source
DataFrames."""


class EpochFrames:
    """The epoch DataFrame of the current run layout; a new layout (another run, a
    streaming micro-batch's graph) builds a new one."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.reuse = has_local_properties(spark)
        """False over Spark Connect: each epoch builds its frame with its whole plan."""
        self._template: ExecutionPlan | None = None
        self._layout: str | None = None
        """The run's encoded layout when its stages are shared (else their own plan)."""
        self._frame: DataFrame | None = None
        self._exchanges = False
        """Whether the frame has exchanges, whose shuffle output a rerun of the same
        query would reuse: each epoch then runs a new query (an alias) over it."""
        self.builds = 0
        """Epoch DataFrames built so far (one per run layout, not one per epoch)."""

    def frame_for(self, plan: ExecutionPlan) -> DataFrame:
        """A fresh query of the epoch's stages, for ``plan``'s layout."""
        if not self.reuse:
            self.builds += 1
            return build_epoch_frame(self.spark, plan, epoch_from_task=False)
        if self._frame is None or self._template is None or not plan.same_layout(self._template):
            self._template = plan
            self._layout = encoded_layout(plan)
            if len(self._layout) > SHARED_LAYOUT_LIMIT:
                self._layout = None
                self._frame = build_epoch_frame(self.spark, plan)
                self.builds += 1
            else:
                self._frame = self._shared_stages(plan).alias("run")  # planned anew
            self._exchanges = len(plan.graph.layers()) > 1
        if not self._exchanges:
            return self._frame  # one stage: each action runs it anew, nothing to reuse
        return self._frame.alias("epoch")  # a new query: fresh exchanges, nothing reused

    def task_property(self, plan: ExecutionPlan) -> str:
        """What the epoch's tasks read from ``EPOCH_PROPERTY``: its part of the plan,
        after the run's layout if the stages are shared (call after ``frame_for``)."""
        part = plan.encoded_epoch_part()
        return part if self._layout is None else with_layout(self._layout, part)

    def _shared_stages(self, plan: ExecutionPlan) -> DataFrame:
        """The process's stages for ``plan``'s sources and stage widths, built once."""
        sources = tuple(v.transformations[0].spark_source for v in plan.graph.layers()[0])
        key = (
            id(self.spark),
            tuple(id(s) if s is not None else None for s in sources),
            tuple(plan.stage_widths),
            tuple(v.parallelism for v in plan.graph.layers()[0]),
        )
        with _shared_lock:
            kept = _shared_stages.get(key)
            if kept is not None and all(a is b for a, b in zip(kept[0], sources, strict=True)):
                _shared_stages.move_to_end(key)
                return kept[1]
        frame = build_epoch_frame(self.spark, plan, True, True)
        self.builds += 1
        with _shared_lock:
            _shared_stages[key] = (sources, frame)
            while len(_shared_stages) > SHARED_STAGES_KEPT:
                _shared_stages.popitem(last=False)
        return frame


_shared_stages: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], DataFrame]] = OrderedDict()
_shared_lock = threading.Lock()


def has_local_properties(spark: SparkSession) -> bool:
    """Whether the session can hand tasks a local property (not over Spark Connect)."""
    try:
        spark.sparkContext  # noqa: B018
    except Exception:  # Spark Connect: no SparkContext
        return False
    return True


@functools.cache
def message_type() -> Any:
    """The stages' output type as a StructType, parsed once per process: handed the DDL
    string, each ``mapInArrow`` call parsed it again through py4j (17 ms a stage against
    8 ms, bench/RESULTS.md "Fixed cost per job")."""
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(MESSAGE_DDL)


def build_epoch_frame(
    spark: SparkSession, plan: ExecutionPlan, epoch_from_task: bool = True, shared: bool = False
) -> DataFrame:
    """The epoch as one DataFrame: the source stage and a stage per layer after an exact
    exchange; its stage functions read the epoch's part of the plan from
    ``EPOCH_PROPERTY`` (``epoch_from_task``), else from ``plan``, and with ``shared``
    the whole plan (functions without a plan serve any job's run). The epoch's action
    collects the last stage's output, which is only acknowledgements and reports
    (``JobMaster`` checks): a separate gathering stage cost a shuffle and a Python task
    per epoch (~80 ms under load, bench/RESULTS.md)."""
    layers = plan.graph.layers()
    schema = message_type() if epoch_from_task else MESSAGE_DDL  # Spark Connect: the DDL
    own = None if shared else plan
    frames = []
    for vertex in layers[0]:
        frame: Any = vertex.transformations[0].spark_source
        if frame is None:
            frame = spark.range(0, vertex.parallelism, 1, vertex.parallelism)
        frames.append(
            frame.mapInArrow(StageFunction(own, 0, epoch_from_task=epoch_from_task), schema)
        )
    stage = reduce(lambda a, b: a.union(b), frames)
    for index in range(1, len(layers)):
        stage = stage.repartitionById(plan.stage_widths[index], "route").mapInArrow(
            StageFunction(own, index, epoch_from_task=epoch_from_task), schema
        )
    return stage  # the driver collects the last stage: only acknowledgements and reports
