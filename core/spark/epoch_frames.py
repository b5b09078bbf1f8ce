"""The DataFrame of a run's epochs, built once per run layout and reused by every epoch:
building an epoch's stages through py4j (sources, ``mapInArrow`` per stage, exchanges)
would otherwise be most of an epoch's driver work (bench/RESULTS.md, "Epochs").

The stages differ between epochs of a run only in the plan's per-epoch part (barrier,
restores, source splits), so the frame is built once; each epoch runs a fresh query over
its logical plan (a new physical plan, so no shuffle output of an earlier epoch is
reused; a frame without exchanges runs as it is) and hands its per-epoch part to the
tasks as a Spark local property, which Spark sends with each task of the epoch's job
(``core/spark/run_settings.py``).

The stages themselves are shared between jobs of the process that read the same source
DataFrames in the same stage widths: their functions hold no plan, and each epoch's
local property carries the run's layout too. A job then pays neither ``mapInArrow``'s
py4j calls nor pickling its plan into them (bench/RESULTS.md, "The 1,000-row job with
shared stages and a frozen worker heap"); each run still plans a new query over the
shared stages, under the settings of the moment (a query is planned once: a kept one
would run a stale plan). A layout whose encoded plan
is over ``SHARED_LAYOUT_LIMIT`` keeps its plan in its own stages' functions instead,
which Spark ships once per stage rather than with every task. So does the layout of a
job with storage secrets (``storage_options``): Spark's event log keeps every local
property as it is (it redacts only its configuration's), while a stage's function is
never logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.spark.stage_frames import build_stages, shared_stages, stage_sources
from flintlock.core.spark.task_plan import encoded_layout, with_layout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


SHARED_LAYOUT_LIMIT = 128 * 1024
"""Characters of an encoded layout up to which a run's stages are shared between jobs
(the layout then rides with every task of every epoch)."""


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

    def frame_for(self, plan: ExecutionPlan) -> DataFrame:
        """A fresh query of the epoch's stages, for ``plan``'s layout."""
        if not self.reuse:
            return build_epoch_frame(self.spark, plan, epoch_from_task=False)
        if self._frame is None or self._template is None or not plan.same_layout(self._template):
            self._template = plan
            secrets = plan.storage_options.has_secrets()
            self._layout = None if secrets else encoded_layout(plan)
            if self._layout is None or len(self._layout) > SHARED_LAYOUT_LIMIT:
                self._layout = None
                self._frame = build_epoch_frame(self.spark, plan)
            else:
                stages = shared_stages(self.spark, *stage_sources(plan))
                self._frame = stages.alias("run")  # a new query, planned under the run's settings
            self._exchanges = len(plan.graph.layers()) > 1
        if not self._exchanges:
            return self._frame  # one stage: each action runs it anew, nothing to reuse
        return self._frame.alias("epoch")  # a new query: fresh exchanges, nothing reused

    def task_property(self, plan: ExecutionPlan) -> str:
        """What the epoch's tasks read from ``EPOCH_PROPERTY``: its part of the plan,
        after the run's layout if the stages are shared (call after ``frame_for``)."""
        part = plan.encoded_epoch_part()
        return part if self._layout is None else with_layout(self._layout, part)


def has_local_properties(spark: SparkSession) -> bool:
    """Whether the session can hand tasks a local property (not over Spark Connect)."""
    try:
        spark.sparkContext  # noqa: B018
    except Exception:  # Spark Connect: no SparkContext
        return False
    return True


def build_epoch_frame(
    spark: SparkSession, plan: ExecutionPlan, epoch_from_task: bool = True
) -> DataFrame:
    """The epoch as one DataFrame with ``plan`` in its stage functions: the source stage
    and a stage per layer after an exact exchange; they read the epoch's part of the
    plan from ``EPOCH_PROPERTY`` (``epoch_from_task``), else from ``plan``. The epoch's
    action collects the last stage's output, which is only acknowledgements and reports
    (``JobMaster`` checks): a separate gathering stage would cost a shuffle and a Python
    task per epoch (bench/RESULTS.md, "W4 after the per-epoch cuts")."""
    return build_stages(spark, *stage_sources(plan), plan, epoch_from_task)
