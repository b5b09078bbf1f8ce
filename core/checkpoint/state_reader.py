"""Read the state in a checkpoint offline: state tables and timers, each file checked,
and the account ``flintlock checkpoints show`` prints (``reader.py`` reads the metadata
and manifests these come from).

A restore checks every state file it will read here, on the driver, before the job runs
(``restore.py``): a missing or damaged file is refused naming it, rather than failing a
task halfway through a restore."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.checkpoint.reader import Checkpoint, load_checkpoint
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import CheckpointError

KEYED_COLUMNS = ("key_group", "key", "value")
OPERATOR_COLUMNS = ("value",)
TIMER_COLUMNS = ("key_group", "key", "timestamp")


def verify_state_files(checkpoint: Checkpoint, operators: set[str] | None = None) -> None:
    """Read every state and timer file of ``operators`` (names; all if None) and check it:
    present, whole Arrow IPC, the columns of its kind, key groups of its subtask only."""
    for snapshot in checkpoint.subtasks:
        owned = snapshot.key_group_range()
        for name, operator in snapshot.operators.items():
            if operators is not None and name not in operators:
                continue
            for file in operator.keyed:
                read_state_file(checkpoint.storage, file.path, KEYED_COLUMNS, owned)
            if operator.timers:
                read_state_file(checkpoint.storage, operator.timers, TIMER_COLUMNS, owned)
            for file in operator.operator_state:
                read_state_file(checkpoint.storage, file.path, OPERATOR_COLUMNS, None)


def read_state_file(
    storage: CheckpointStorage, path: str, columns: tuple[str, ...], owned: range | None
) -> pa.Table:
    """One state file, checked: its columns, and (keyed) its key groups within ``owned``."""
    table = storage.read_table(path)
    try:
        table.validate(full=True)
    except pa.ArrowInvalid as error:
        raise CheckpointError(f"the Arrow file {path} is damaged: {error}") from error
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise CheckpointError(
            f"the state file {path} has no column {missing[0]!r} (its columns are "
            f"{table.column_names}): it is not a flintlock state file of this kind"
        )
    if owned is not None and table.num_rows:
        groups = table.column("key_group")
        low, high = pc.min(groups).as_py(), pc.max(groups).as_py()
        if low < owned.start or high >= owned.stop:
            raise CheckpointError(
                f"the state file {path} holds key groups {low}..{high}, outside "
                f"{owned.start}..{owned.stop - 1} of the subtask whose manifest lists it: it "
                f"belongs to another subtask or job"
            )
    return table


def read_state(path: str, operator: str, state: str) -> pa.Table:
    """The rows of state ``state`` of ``operator`` (uid or name) in the checkpoint at ``path``.

    Keyed state: columns ``key_group``, ``key``, any others its backend wrote (a map
    state's ``map_key``, a TTL's timestamps), ``value``; by key group. Operator list state:
    ``subtask`` (the old subtask index) and ``value``, in list order."""
    checkpoint = load_checkpoint(path)
    info = checkpoint.operator(operator)
    kind = info.states.get(state)
    if kind is None:
        raise CheckpointError(
            f"operator {info.uid!r} in checkpoint {checkpoint.path} has no state {state!r}; "
            f"its states are {sorted(info.states)}"
        )
    tables = []
    for snapshot in sorted(checkpoint.subtasks, key=lambda s: (s.task_name, s.subtask_index)):
        snapshotted = snapshot.operators.get(info.name)
        if snapshotted is None:
            continue
        if kind.startswith("operator-"):
            for file in snapshotted.operator_state:
                if file.name == state:
                    table = read_state_file(checkpoint.storage, file.path, OPERATOR_COLUMNS, None)
                    subtask = pa.array([snapshot.subtask_index] * table.num_rows, pa.int32())
                    tables.append(pa.table({"subtask": subtask, "value": table.column("value")}))
        else:
            owned = snapshot.key_group_range()
            for file in snapshotted.keyed:
                if file.name == state:
                    table = read_state_file(checkpoint.storage, file.path, KEYED_COLUMNS, owned)
                    rest = [c for c in table.column_names if c not in KEYED_COLUMNS]
                    tables.append(table.select(["key_group", "key", *rest, "value"]))
    return _concat(tables, "key_group" if not kind.startswith("operator-") else None)


def read_timers(path: str, operator: str) -> pa.Table:
    """The pending event-time timers of ``operator``: ``key_group``, ``key``, ``timestamp``."""
    checkpoint = load_checkpoint(path)
    info = checkpoint.operator(operator)
    tables = []
    for snapshot in checkpoint.subtasks:
        snapshotted = snapshot.operators.get(info.name)
        if snapshotted is not None and snapshotted.timers:
            owned = snapshot.key_group_range()
            table = read_state_file(checkpoint.storage, snapshotted.timers, TIMER_COLUMNS, owned)
            tables.append(table.select(list(TIMER_COLUMNS)))
    return _concat(tables, "key_group")


def describe(checkpoint: Checkpoint) -> dict[str, Any]:
    """A JSON-ready account of a checkpoint: identity, operators, states, files and bytes."""
    sizes: dict[tuple[str, str], list[int]] = {}
    for snapshot in checkpoint.subtasks:
        for name, operator in snapshot.operators.items():
            files = [(f.name, f.path) for f in operator.keyed + operator.operator_state]
            files += [("(timers)", operator.timers)] if operator.timers else []
            for state, file_path in files:
                size = checkpoint.storage.filesystem.get_file_info(file_path).size or 0
                sizes.setdefault((name, state), []).append(size)
    operators = []
    for name, info in sorted(checkpoint.operators().items()):
        kinds = {**info.states, **({"(timers)": "timers"} if info.has_timers else {})}
        states = [
            {
                "state": state,
                "kind": kind,
                "files": len(sizes.get((name, state), [])),
                "bytes": sum(sizes.get((name, state), [])),
            }
            for state, kind in sorted(kinds.items())
        ]
        operators.append(
            {
                "uid": info.uid,
                "name": name,
                "vertex": info.vertex,
                "parallelism": info.parallelism,
                "states": states,
            }
        )
    return {
        "path": checkpoint.path,
        "job_name": checkpoint.job_name,
        "job_id": checkpoint.job_id,
        "checkpoint_id": checkpoint.checkpoint_id,
        "run_id": checkpoint.run_id,
        "kind": checkpoint.kind,
        "savepoint": checkpoint.savepoint,
        "final": checkpoint.final,
        "committed": checkpoint.committed,
        "max_parallelism": checkpoint.max_parallelism,
        "operators": operators,
    }


def _concat(tables: list[pa.Table], sort_column: str | None) -> pa.Table:
    if not tables:
        return pa.table({})
    table = pa.concat_tables(tables, promote_options="permissive")
    if sort_column is not None:
        table = table.sort_by([(sort_column, "ascending")])
    return table
