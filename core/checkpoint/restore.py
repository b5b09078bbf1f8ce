"""Restore a job from a completed checkpoint or savepoint, also with another parallelism.

Operators are matched by uid (``DataStream.uid``, defaulting to the name). Each new
subtask gets the snapshots of the old subtasks whose key groups overlap its own (keyed
state and timers move with their key groups) and every old subtask's operator list state
(split evenly, or whole for union state). Everything is checked on the driver before the
job runs: nothing is half-restored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from flintlock.core.checkpoint.finished_subtasks import restored_finishes
from flintlock.core.checkpoint.reader import Checkpoint, load_checkpoint
from flintlock.core.checkpoint.snapshots import OperatorSnapshot, TaskRestore, TaskSnapshot
from flintlock.core.checkpoint.state_reader import verify_state_files
from flintlock.core.errors import GraphError, RestoreError
from flintlock.core.exchange.key_groups import key_group_range

if TYPE_CHECKING:
    from flintlock.core.checkpoint.storage import CheckpointStorage
    from flintlock.core.plan.graph import JobGraph, Transformation


@dataclass(frozen=True)
class RestoreSource:
    """A checked checkpoint to restore from, and which new operator takes which old state."""

    checkpoint: Checkpoint
    names: dict[str, str]
    """Old operator name -> new operator name (same uid)."""
    dropped: list[str]
    """uids of old operators with state that the job no longer has (allowed, skipped)."""

    @property
    def checkpoint_id(self) -> int:
        """The id of the checkpoint restored from; the new run's checkpoints come after it."""
        return self.checkpoint.checkpoint_id


def operator_uids(transformations: Iterable[Transformation]) -> dict[str, str]:
    """Operator name -> uid; two operators with one uid are a GraphError naming both."""
    uids: dict[str, str] = {}
    owner: dict[str, str] = {}
    for t in transformations:
        uid = t.uid or t.name
        if uid in owner:
            raise GraphError(
                f"operators '{owner[uid]}' and '{t.name}' have the same uid {uid!r}: a uid "
                f"names one operator's state in checkpoints; give each its own with .uid(...)"
            )
        owner[uid] = t.name
        uids[t.name] = uid
    return uids


def prepare_restore(
    path: str,
    uids: dict[str, str],
    max_parallelism: int,
    allow_non_restored_state: bool = False,
    storage: CheckpointStorage | None = None,
) -> RestoreSource:
    """Load and check the checkpoint at ``path`` for a job whose operators have ``uids``.

    ``path``: a local path or URI, or with ``storage`` a path on its file system (a
    checkpoint of the job's own folder).

    Refused (RestoreError / CheckpointError naming what): another max parallelism, state
    of an operator the job no longer has (unless ``allow_non_restored_state``), any
    missing, damaged or foreign file of the state to restore."""
    checkpoint = load_checkpoint(path, storage)
    if checkpoint.max_parallelism != max_parallelism:
        raise RestoreError(
            f"checkpoint {checkpoint.path} was taken with max parallelism "
            f"{checkpoint.max_parallelism}, the job has {max_parallelism}: key groups cannot "
            f"be remapped; run with max_parallelism={checkpoint.max_parallelism}"
        )
    new_by_uid = {uid: name for name, uid in uids.items()}
    names: dict[str, str] = {}
    dropped: list[str] = []
    for name, info in sorted(checkpoint.operators().items()):
        if info.uid in new_by_uid:
            names[name] = new_by_uid[info.uid]
        elif info.has_state:
            dropped.append(info.uid)
    if dropped and not allow_non_restored_state:
        raise RestoreError(
            f"checkpoint {checkpoint.path} holds state of operator(s) {dropped} (uid), which "
            f"the job no longer has; give the operator that should take it that uid "
            f"(.uid(...)), or pass allow_non_restored_state=True to skip that state"
        )
    verify_state_files(checkpoint, set(names))
    return RestoreSource(checkpoint, names, dropped)


def plan_restores(source: RestoreSource, graph: JobGraph) -> dict[tuple[int, int], TaskRestore]:
    """What every subtask of every vertex restores from (each gets one: is_restored), and
    whether it stays finished (``core/checkpoint/finished_subtasks.py``)."""
    checkpoint = source.checkpoint
    finished = restored_finishes(checkpoint, graph)
    restores = {}
    for vertex in graph.vertices.values():
        mine = {t.name for t in vertex.all_transformations}
        names = {old: new for old, new in source.names.items() if new in mine}
        for subtask in range(vertex.parallelism):
            restore = subtask_restore(
                checkpoint.checkpoint_id,
                checkpoint.subtasks,
                names,
                subtask,
                vertex.parallelism,
                checkpoint.max_parallelism,
            )
            at = finished.get((vertex.id, subtask))
            restores[(vertex.id, subtask)] = replace(restore, finished_at=at)
    return restores


def subtask_restore(
    checkpoint_id: int,
    snapshots: list[TaskSnapshot],
    names: dict[str, str],
    subtask_index: int,
    parallelism: int,
    max_parallelism: int,
) -> TaskRestore:
    """What subtask ``subtask_index`` of ``parallelism`` restores of ``snapshots``.

    ``names`` maps old operator names to the new ones that take their state. Keyed state
    and timers come only from old subtasks whose key groups overlap the new subtask's;
    operator state from all of them (the store splits it or, for union state, keeps all).
    """
    owned = key_group_range(subtask_index, parallelism, max_parallelism)
    chosen = []
    for snapshot in snapshots:
        old = snapshot.key_group_range()
        overlaps = old.start < owned.stop and owned.start < old.stop
        operators = {}
        for old_name, operator in snapshot.operators.items():
            new_name = names.get(old_name)
            if new_name is None:
                continue
            operators[new_name] = OperatorSnapshot(
                operator=new_name,
                keyed=operator.keyed if overlaps else [],
                operator_state=operator.operator_state,
                timers=operator.timers if overlaps else None,
            )
        if operators:
            chosen.append(replace(snapshot, operators=operators))
    return TaskRestore(checkpoint_id, chosen)


def rescale(snapshots: list[TaskSnapshot], subtask_index: int, parallelism: int) -> TaskRestore:
    """A harness's restore of one new subtask from every old subtask's snapshot (same
    operator names), for testing an operator at another parallelism."""
    if not snapshots:
        raise ValueError("rescale needs the snapshots of every old subtask")
    names = {name: name for s in snapshots for name in s.operators}
    first = snapshots[0]
    return subtask_restore(
        first.checkpoint_id, snapshots, names, subtask_index, parallelism, first.max_parallelism
    )


def finished_in(restore: RestoreSource | None) -> dict[str, int]:
    """The fully finished vertices of the checkpoint restored from (vertex name -> the
    checkpoint it finished in): every subtask's snapshot says it finished. A final
    checkpoint (every vertex finished) restored by a new run is run again in full."""
    if restore is None or restore.checkpoint.final:
        return {}
    finished: dict[str, int | None] = {}
    for snapshot in restore.checkpoint.subtasks:
        at = snapshot.finished_at
        known = finished.get(snapshot.task_name, at)
        finished[snapshot.task_name] = None if at is None or known is None else max(at, known)
    return {name: at for name, at in finished.items() if at is not None}
