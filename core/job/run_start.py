"""How a run starts: its graph (its DataFrame sources as this run reads them), its
sources, where its first epoch starts (a restore, the sources' states, the checkpoint
id), and what every checkpoint of it records besides the acknowledgements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
from flintlock.core.checkpoint.reader import load_checkpoint
from flintlock.core.checkpoint.restore import RestoreSource, plan_restores, prepare_restore
from flintlock.core.checkpoint.snapshots import TaskRestore
from flintlock.core.errors import GraphError, RestoreError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.plan.graph import JobGraph, Transformation, build_job_graph
from flintlock.core.sources.epochs import UnboundedSource
from flintlock.core.sources.source import SourceOperator
from flintlock.core.spark import source_partitions
from flintlock.core.spark.source_partitions import SourcePartitionCounts
from flintlock.core.spark.streaming_source import StreamingDataFrameSource

if TYPE_CHECKING:
    from flintlock.core.job.run import JobRun


@dataclass(frozen=True)
class StartPoint:
    """Where a run's first epoch starts."""

    restore: RestoreSource | None
    """The checkpoint it restores (None: a new job, or one started anew)."""
    source_states: dict[str, Any]
    """The unbounded sources' states by uid (empty: they start at their beginning)."""
    checkpoint_id: int
    """The first epoch's checkpoint id."""


def starting_point(run: JobRun, latest: CompletedCheckpoint | None, new_run: bool) -> StartPoint:
    """Restore ``restore_from`` if given; else continue the job's latest checkpoint (after
    a crash, a stop or an available-now run) unless it was final or ``new_run`` asks to
    start anew; a new start first lets the sinks check and prepare their output and
    drops what an earlier run left uncommitted."""
    run.run_log.record_run(run.run_id)
    next_id = next_checkpoint_id(run, latest)
    restore = run.config.restore
    if restore is not None:
        check_restore_storage(run, restore)
        if not run.sources and run.streaming is None:
            new_output(run, latest, next_id)  # a bounded run from it is a new start
        states = dict(restore.checkpoint.sources)
        return StartPoint(restore, states, max(next_id, restore.checkpoint_id + 1))
    if latest is not None and not new_run and not latest.final:
        run.coordinator.commit(latest, run.sinks)  # idempotent
        run.abort_uncommitted(latest.committables)
        path = run.folder.checkpoint_dir(latest.checkpoint_id)
        restore = prepare_restore(path, run.uids, run.config.max_parallelism, storage=run.storage)
        return StartPoint(restore, dict(latest.sources), next_id)
    new_output(run, latest, next_id)
    return StartPoint(None, {}, next_id)


def new_output(run: JobRun, latest: CompletedCheckpoint | None, checkpoint_id: int) -> None:
    """A new start: the sinks' output modes decide what becomes of their existing output
    (refused before anything is written), and what an earlier run staged but never
    committed goes."""
    context = run.coordinator.commit_context(run.run_id, checkpoint_id)
    for name, sink in run.sinks.items():
        sink.prepare_output(context.for_sink(name))
    pending = latest is not None and not latest.final and not latest.committed
    run.abort_uncommitted(latest.committables if pending and latest else {})


def next_checkpoint_id(run: JobRun, latest: CompletedCheckpoint | None) -> int:
    """A run's first checkpoint id: above every id used (completed, committed, fenced)."""
    highest = run.coordinator.highest_id()
    return max(highest, latest.checkpoint_id if latest is not None else 0) + 1


def check_restore_storage(run: JobRun, restore: RestoreSource) -> None:
    """Tasks read the restored files through the job's checkpoint file system."""
    theirs = type(restore.checkpoint.storage.filesystem).__name__
    ours = type(run.storage.filesystem).__name__
    if theirs != ours:
        raise RestoreError(
            f"checkpoint {restore.checkpoint.path} is on a {theirs}, the job's checkpoint "
            f"directory {run.config.checkpoint_uri} on a {ours}: copy it there first"
        )


def checkpoint_details(run: JobRun) -> dict[str, Any]:
    """What the metadata records besides acknowledgements: operators by name with their
    uid, vertex and parallelism; max parallelism; the checkpoint restored from; the graph
    (vertices, edges, partitioners)."""
    operators = {
        t.name: {"uid": run.uids[t.name], "vertex": v.name, "parallelism": v.parallelism}
        for v in run.graph.vertices.values()
        for t in v.all_transformations
    }
    restore = run.config.restore
    restored_from = None
    if restore is not None:
        restored_from = {
            "path": restore.checkpoint.path,
            "job_name": restore.checkpoint.job_name,
            "checkpoint_id": restore.checkpoint_id,
            "skipped_uids": restore.dropped,
        }
    return {
        "operators": operators,
        "max_parallelism": run.config.max_parallelism,
        "restored_from": restored_from,
        "graph": run.graph.to_json(),
    }


def run_graph(run: JobRun, counts: SourcePartitionCounts) -> tuple[list[Transformation], JobGraph]:
    """The run's transformations and graph (``core/spark/source_partitions.py``). A
    source that starts from a count (an earlier run's, or its default subtasks) is
    checked in the epoch's own query, planned here for the action; if the count does
    not hold, the graph is built anew from the partitions found."""
    transformations = counts.transformations()
    graph = counts.checked_graph
    if graph is None:
        return transformations, build_job_graph(transformations)
    run.graph = graph  # the layout plan below is the run's plan with no epoch yet
    layout = run.plan(CheckpointBarrier(0, "checkpoint", True))
    frame = run.epoch_frames.frame_for(layout)
    planned = source_partitions.planned_partitions(frame)
    if planned == source_partitions.source_subtasks(graph):
        return transformations, graph  # the action runs the plan just made
    transformations = counts.corrected(planned)
    return transformations, build_job_graph(transformations)


def job_sources(
    transformations: list[Any], graph: JobGraph
) -> tuple[dict[str, tuple[UnboundedSource, int]], Any, list[str]]:
    """Source operator name -> (its unbounded source, its parallelism); the
    transformation of a streaming DataFrame source (or None); the bounded sources' names.
    A streaming DataFrame with other sources is refused: its micro-batches are the
    epochs."""
    parallelism = {
        t.name: v.parallelism for v in graph.vertices.values() for t in v.all_transformations
    }
    found: dict[str, tuple[UnboundedSource, int]] = {}
    streaming = []
    bounded = []
    for t in transformations:
        if not t.is_source:
            continue
        operator = t.make_operator()
        source = operator.source if isinstance(operator, SourceOperator) else None
        if isinstance(source, UnboundedSource):
            found[t.name] = (source, parallelism[t.name])
        elif isinstance(source, StreamingDataFrameSource):
            streaming.append(t)
        else:
            bounded.append(t.name)
    if streaming and (found or bounded or len(streaming) > 1):
        names = sorted([*found, *bounded, *(t.name for t in streaming)])
        raise GraphError(
            f"a job with a streaming DataFrame source reads nothing else (its micro-batches "
            f"are the epochs); this one reads {names}"
        )
    return found, (streaming[0] if streaming else None), bounded


def restores_after(
    run: JobRun, checkpoint: CompletedCheckpoint
) -> dict[tuple[int, int], TaskRestore]:
    """What the run's next epoch restores: the checkpoint its last one completed (through
    the job's storage: its paths have no scheme), from its metadata and manifests as the
    driver has them (published, and sent in the acknowledgements: nothing read back)."""
    checkpoint_id = checkpoint.checkpoint_id
    stored = load_checkpoint(
        run.folder.checkpoint_dir(checkpoint_id),
        run.storage,
        own_job=True,
        published=run.coordinator.published(checkpoint_id),
        sent=checkpoint.acknowledgements,
    )
    names = {name: name for name in stored.operators()}
    return plan_restores(RestoreSource(stored, names, []), run.graph)
