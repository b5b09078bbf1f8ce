"""The Spark settings a job run keeps for all its epochs: adaptive execution off, Arrow
batches of 65,536 rows (unless the user chose a size), and the driver thread's job
group, description, epoch property and task output folder, saved once when the run
starts and put back when it ends. A job group the caller set is kept (its cancel must
reach the epochs): the epoch is then a job tag.

Saving and restoring them around every epoch would cost many py4j calls per epoch
(bench/RESULTS.md, "Fixed cost per job and per epoch"); inside a run an epoch sets only
what changes: its job group and description, and its part of the plan (two calls).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from flintlock.core.plan.execution import EPOCH_PROPERTY
from flintlock.core.spark.job_group import (
    DESCRIPTION,
    GROUP,
    INTERRUPT,
    EpochJob,
    epoch_spark_jobs,
)
from flintlock.core.spark.session import spark_ui_url
from flintlock.core.spark.sources import adaptive_execution_off, larger_arrow_batches
from flintlock.core.spark.task_output import OUTPUT_PROPERTY, TaskOutputRelay

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

SAVED_PROPERTIES = (GROUP, DESCRIPTION, INTERRUPT, EPOCH_PROPERTY, OUTPUT_PROPERTY)


class RunSettings:
    """Labels each epoch's Spark job inside ``run_settings``: its job group, or a job tag
    in the caller's job group; over Spark Connect (no local properties) an epoch's
    operations carry a job tag instead, and its tasks get their whole plan
    (``EpochFrames``)."""

    def __init__(
        self, spark: SparkSession, context: SparkContext | None, relay: TaskOutputRelay | None
    ) -> None:
        self.spark = spark
        self.context = context
        self.relay = relay
        """What the tasks print() reaches the driver's terminal (local mode only)."""
        self.caller_group = None if context is None else context.getLocalProperty(GROUP)
        """The job group the caller set around the run: each epoch's Spark job runs in it
        (so the caller's ``cancelJobGroup`` cancels the epoch), flintlock's own label
        then a job tag."""
        self.spark_ui = None if context is None else spark_ui_url(spark)
        self.spark_jobs: dict[int, dict[str, Any]] = {}
        """Checkpoint id -> its epoch's Spark jobs and stages and the address of Spark's
        UI, noted where the session has a UI: the epoch's figures take them."""

    @contextlib.contextmanager
    def epoch(self, job: EpochJob, task_property: str) -> Iterator[None]:
        """Run the block's Spark action as ``job``'s epoch, its tasks reading their part
        of the plan from ``task_property``; then print what its tasks printed, failed or
        not."""
        if self.context is None:
            tag = job.tag
            self.spark.addTag(tag)
            try:
                yield
            finally:
                self.spark.removeTag(tag)
            return
        tagged = self.caller_group is not None
        if tagged:  # the caller's group and its interruptOnCancel stay: its cancel reaches
            self.context.addJobTag(job.tag)
            self.context.setLocalProperty(DESCRIPTION, job.description)
        else:
            self.context.setJobGroup(job.group, job.description)
        self.context.setLocalProperty(EPOCH_PROPERTY, task_property)
        try:
            yield  # the next epoch overwrites these; the run's end puts the thread's back
            if self.spark_ui is not None:  # no py4j call per epoch where Spark has no UI
                jobs, stages = epoch_spark_jobs(self.spark, job)
                self.spark_jobs[job.checkpoint_id] = {
                    "ui": self.spark_ui,
                    "jobs": jobs,
                    "stages": stages,
                }
        finally:
            if tagged:
                self.context.removeJobTag(job.tag)
            if self.relay is not None:
                self.relay.relay()


@contextlib.contextmanager
def run_settings(spark: SparkSession) -> Iterator[RunSettings]:
    """For one job run: AQE off, larger Arrow batches and the thread's labels saved; all
    restored at the end."""
    try:
        context: SparkContext | None = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext
        context = None
    restore = _saved_properties(context) if context is not None else None
    relay = None if context is None else TaskOutputRelay.for_run(context)
    with adaptive_execution_off(spark), larger_arrow_batches(spark):
        try:
            yield RunSettings(spark, context, relay)
        finally:
            if relay is not None:
                relay.close()
            if restore is not None:
                restore()


def _saved_properties(context: SparkContext) -> Callable[[], None]:
    """Save the thread's local properties; the returned call puts them back. A copy of
    the thread's whole property set (3 py4j calls, then 1) where the JVM's SparkContext
    offers it, else each of ``SAVED_PROPERTIES`` (10 calls)."""
    try:
        jvm_context = context._jsc.sc()
        copy = jvm_context.getLocalProperties().clone()
    except Exception:  # another SparkContext implementation: key by key
        saved = {key: context.getLocalProperty(key) for key in SAVED_PROPERTIES}

        def restore_each() -> None:
            for key, value in saved.items():
                context.setLocalProperty(key, value)  # type: ignore[arg-type]

        return restore_each
    return lambda: jvm_context.setLocalProperties(copy)
