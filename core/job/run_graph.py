"""A run's graph: the job's transformations with their DataFrame sources as the run reads
them (``core/spark/source_partitions.py``), chained into vertices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flintlock.core.events import CheckpointBarrier
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.plan.graph import JobGraph, Transformation, build_job_graph
from flintlock.core.spark import source_partitions

if TYPE_CHECKING:
    from flintlock.core.job.master import JobMaster


def run_graph(master: JobMaster) -> tuple[list[Transformation], JobGraph]:
    """The run's transformations and graph. A source that starts from a count (an earlier
    run's, or its default subtasks) is checked in the epoch's own query, planned here for
    the action; if the count does not hold, the graph is built anew from the partitions
    found."""
    counts = master.source_counts
    if counts is None:
        raise RuntimeError("run_graph runs only inside JobMaster.execute")
    transformations = counts.transformations()
    graph = counts.checked_graph
    if graph is None:
        return transformations, build_job_graph(transformations)
    frame = master.epoch_frames.frame_for(layout_plan(master, graph))
    planned = source_partitions.planned_partitions(frame)
    if planned == source_partitions.source_subtasks(graph):
        return transformations, graph  # the action runs the plan just made
    transformations = counts.corrected(planned)
    return transformations, build_job_graph(transformations)


def layout_plan(master: JobMaster, graph: JobGraph) -> ExecutionPlan:
    """A plan with the run's layout (``ExecutionPlan.same_layout``) and no epoch yet: the
    epoch frame built for it serves the run's epochs."""
    config = master.config
    return ExecutionPlan(
        job_name=config.job_name,
        run_id=master.run_id,
        epoch=0,
        barrier=CheckpointBarrier(0, "checkpoint", True),
        checkpoint_uri=config.checkpoint_uri,
        max_parallelism=config.max_parallelism,
        state_backend=config.state_backend,
        graph=graph,
        plugins=config.plugins,
        job_id=master.folder.job_id,
        metrics=config.metrics,
    )
