"""Finished subtasks of vertices that still run (FLIP-147 at subtask granularity).

A source subtask whose splits are exhausted (``EpochSplits.exhausted_subtasks``) ends its
input and finishes in that epoch while its siblings go on; so does a subtask downstream
once every upstream subtask feeding it finished. From the next epoch on, and after a
restore at the same parallelism, it runs no operator: its Spark partition only forwards
the end of its output and acknowledges as finished (``core/runtime/finished_task.py``), as the
subtasks of a fully finished vertex do. After a rescale only fully finished vertices stay
finished (as in Flink): the subtasks of a partially finished vertex all run again from the
restored state, and the enumerator, told the new parallelism, says again which are
exhausted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from flintlock.core.errors import GraphError
from flintlock.core.plan.graph import JobGraph, JobVertex

if TYPE_CHECKING:
    from flintlock.core.checkpoint.reader import Checkpoint
    from flintlock.core.checkpoint.snapshots import TaskAcknowledgement, TaskRestore, TaskSnapshot
    from flintlock.core.sources.epochs import EpochSplits

Finished = dict[tuple[int, int], int]
"""(vertex id, subtask) -> the checkpoint that subtask finished in."""


def restored_finishes(checkpoint: Checkpoint, graph: JobGraph) -> Finished:
    """The subtasks of ``graph`` that stay finished when restored from ``checkpoint``.

    Every subtask of a fully finished vertex, at any parallelism; a finished subtask of a
    vertex still running only at unchanged parallelism, and only if every upstream
    subtask feeding it stays finished too (so nothing can send it data). None from a
    final checkpoint: a new run over it runs every vertex again."""
    if checkpoint.final:
        return {}
    old: dict[str, list[TaskSnapshot]] = {}
    for snapshot in checkpoint.subtasks:
        old.setdefault(snapshot.task_name, []).append(snapshot)
    finished: Finished = {}
    for layer in graph.layers():  # upstream vertices first
        for vertex in layer:
            snapshots = old.get(vertex.name, [])
            ended = [s.finished_at for s in snapshots if s.finished_at is not None]
            if snapshots and len(ended) == len(snapshots):
                finished.update(((vertex.id, i), max(ended)) for i in range(vertex.parallelism))
            elif ended and _same_parallelism(vertex, snapshots):
                for snapshot in snapshots:
                    subtask = snapshot.subtask_index
                    if snapshot.finished_at is not None and _fed_by_finished(
                        graph, vertex, subtask, finished
                    ):
                        finished[(vertex.id, subtask)] = snapshot.finished_at
    return finished


def finished_subtasks(
    graph: JobGraph, restores: Mapping[tuple[int, int], TaskRestore]
) -> dict[str, dict[int, int]]:
    """Vertex name -> {subtask: the checkpoint it finished in}, of the subtasks that
    restore as finished (``TaskRestore.finished_at``)."""
    found: dict[str, dict[int, int]] = {}
    for (vertex_id, subtask), restore in sorted(restores.items()):
        if restore.finished_at is not None:
            found.setdefault(graph.vertices[vertex_id].name, {})[subtask] = restore.finished_at
    return found


def epoch_has_work(
    graph: JobGraph,
    uids: Mapping[str, str],
    planned: Mapping[str, EpochSplits],
    source_ends: Mapping[str, bool],
    finished_vertices: Mapping[str, int],
    restores: Mapping[tuple[int, int], TaskRestore],
) -> bool:
    """True if the epoch has rows to read, or a source subtask whose input ends in it
    (it finishes in an epoch of its own). Splits planned for a finished subtask, or the
    exhausted flag of one dropped, are a GraphError naming the source: rows would be
    lost, or the source would never end."""
    done = finished_subtasks(graph, restores)
    work = False
    sources = [
        (vertex, t)
        for vertex in graph.vertices.values()
        for t in vertex.all_transformations  # a vertex's head, or sources chained in
        if t.is_source
    ]
    for vertex, head in sources:
        uid = uids.get(head.name)
        if uid is None or uid not in planned:
            continue
        splits, ends_all = planned[uid], source_ends[uid]
        for subtask, assignment in enumerate(splits.assignments):
            finished = vertex.name in finished_vertices or subtask in done.get(vertex.name, {})
            ends = ends_all or splits.subtask_exhausted(subtask)
            if finished and (assignment or (splits.exhausted_subtasks is not None and not ends)):
                what = "planned splits" if assignment else "no longer flagged exhausted"
                raise GraphError(
                    f"source '{head.name}': subtask {subtask} finished in an earlier epoch, "
                    f"but is {what} in this one; an exhausted subtask stays exhausted and "
                    f"reads nothing more (keep its exhausted_subtasks flag set)"
                )
            work = work or bool(assignment) or (ends and not finished)
    return work


def _same_parallelism(vertex: JobVertex, snapshots: list[TaskSnapshot]) -> bool:
    """True if ``snapshots`` are one per subtask of ``vertex`` at its parallelism."""
    indices = sorted(s.subtask_index for s in snapshots)
    return indices == list(range(vertex.parallelism)) and all(
        s.parallelism == vertex.parallelism for s in snapshots
    )


def _fed_by_finished(graph: JobGraph, vertex: JobVertex, subtask: int, finished: Finished) -> bool:
    """True if every upstream subtask with a channel into ``subtask`` is finished."""
    for upstream, _, partitioner in vertex.inputs:
        if partitioner.kind == "forward":
            feeding = [subtask]
        else:
            feeding = list(range(graph.vertices[upstream].parallelism))
        if any((upstream, index) not in finished for index in feeding):
            return False
    return True


def fully_finished(
    acknowledgements: list[TaskAcknowledgement], checkpoint_id: int
) -> dict[str, int]:
    """Vertex name -> the checkpoint it finished in, for each vertex whose subtasks all
    acknowledged ``checkpoint_id`` as finished (a fully finished vertex, FLIP-147); an
    acknowledgement without the flag is of a subtask that did not finish."""
    finished: dict[str, int | None] = {}
    for ack in acknowledgements:
        name = ack.task_name
        at = _finished_at(ack, checkpoint_id)
        known = finished.get(name, at)
        finished[name] = None if at is None or known is None else max(known, at)
    return {name: at for name, at in sorted(finished.items()) if at is not None}


def subtasks_finished(
    acknowledgements: list[TaskAcknowledgement], checkpoint_id: int
) -> dict[str, dict[str, int]]:
    """Vertex name -> {subtask index (as a JSON key): the checkpoint it finished in}, for
    every subtask that acknowledged ``checkpoint_id`` as finished, whether its vertex
    finished fully or its siblings go on (FLIP-147 at subtask granularity)."""
    finished: dict[str, dict[str, int]] = {}
    for ack in sorted(acknowledgements, key=lambda a: (a.task_name, a.subtask_index)):
        at = _finished_at(ack, checkpoint_id)
        if at is not None:
            finished.setdefault(ack.task_name, {})[str(ack.subtask_index)] = at
    return finished


def _finished_at(ack: TaskAcknowledgement, checkpoint_id: int) -> int | None:
    """The checkpoint an acknowledging subtask finished in (this one for an ack from
    before ``finished_at``); None if it did not finish."""
    if not ack.finished:
        return None
    return ack.finished_at or checkpoint_id
