"""Creates, restores and snapshots one operator's managed state and timers.

The chain calls it at ``initialize_state`` and ``snapshot_state`` for every operator, so
no operator handles its own checkpoint files: each keyed operator gets a backend for its
subtask's key groups, its timers and its operator state, restored from the snapshot files
that overlap them, by the same rules for every operator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flintlock.core.checkpoint.evolution import stored_value_types
from flintlock.core.checkpoint.snapshots import OperatorSnapshot, TaskRestore
from flintlock.core.checkpoint.storage import CheckpointStorage, safe_name
from flintlock.core.exchange.key_groups import key_group_range
from flintlock.core.runtime.timers import EventTimeTimerService
from flintlock.core.state.backend import StateBackend
from flintlock.core.state.operator_state import OperatorStateStore

if TYPE_CHECKING:
    from flintlock.core.runtime.operator import StreamOperator


def initialize_operator_state(
    operator: StreamOperator,
    backend: StateBackend,
    storage: CheckpointStorage,
    restore: TaskRestore | None,
) -> None:
    """Give ``operator`` its state (restored if ``restore``), then call its initialize_state."""
    context = operator.context
    task = context.task
    context.operator_state = OperatorStateStore(task.subtask_index, task.parallelism)
    snapshots = restore.operator_snapshots(operator.name) if restore is not None else []
    if is_keyed(operator):
        key_groups = key_group_range(task.subtask_index, task.parallelism, task.max_parallelism)
        keyed = backend.create_keyed_backend(key_groups, task.max_parallelism)
        keyed.ttl_clock = backend.ttl_clock
        context.keyed_backend = keyed
        context.timers = EventTimeTimerService(keyed, operator.on_event_time)
        if snapshots:
            keyed_files = [f for s in snapshots for f in s.keyed]
            keyed.restore(storage, keyed_files)
            context.restored_types = stored_value_types(storage, keyed_files)
            context.timers.restore(storage, [s.timers for s in snapshots if s.timers])
    if snapshots and restore is not None:
        old = [
            (snapshot.subtask_index, snapshot.parallelism, snapshot.operators[operator.name])
            for snapshot in restore.snapshots
            if operator.name in snapshot.operators
        ]
        context.operator_state.restore(storage, [(i, p, s.operator_state) for i, p, s in old])
    operator.initialize_state()


def is_keyed(operator: StreamOperator) -> bool:
    """True if the operator has a key: a ``key_column`` or a ``key_selector`` (KeySelector)."""
    return operator.key_column is not None or getattr(operator, "key_selector", None) is not None


def snapshot_operator_state(
    operator: StreamOperator, storage: CheckpointStorage, directory: str
) -> OperatorSnapshot:
    """Write the operator's keyed state, operator state and timers under ``directory``."""
    context = operator.context
    folder = f"{directory}/{safe_name(operator.name)}"
    keyed = context.keyed_backend.snapshot(storage, folder) if context.keyed_backend else []
    timers = context.timers.snapshot(storage, f"{folder}/timers.arrow") if context.timers else None
    return OperatorSnapshot(
        operator=operator.name,
        keyed=keyed,
        operator_state=context.operator_state.snapshot(storage, folder),
        timers=timers,
    )
