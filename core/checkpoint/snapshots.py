"""What a subtask's snapshot contains, as small JSON manifests beside Arrow IPC files.

State is Arrow IPC and manifests are JSON, never pickles, so a checkpoint reads back
without the job's code and offline (CONTRIBUTING.md, "Checkpoint format"). A manifest
records its paths relative to its folder and the key groups its files hold, so a
savepoint can move and a restore at another parallelism reads only the files it needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from flintlock.core.checkpoint.paths import parent_folder, relative_path, resolve_path
from flintlock.core.errors import CheckpointError
from flintlock.core.events import SnapshotKind
from flintlock.core.exchange.key_groups import key_group_range

MANIFEST = "_task.json"


@dataclass(frozen=True)
class StateFile:
    """One snapshotted state: its name, kind and the Arrow IPC file holding it."""

    name: str
    kind: str
    path: str
    mode: str = "split"  # operator list state: "split" (even split) or "union"


@dataclass(frozen=True)
class OperatorSnapshot:
    """The state of one operator of a chain in one subtask's snapshot."""

    operator: str
    keyed: list[StateFile] = field(default_factory=list)
    operator_state: list[StateFile] = field(default_factory=list)
    timers: str | None = None

    def with_paths(self, change: Callable[[str], str]) -> OperatorSnapshot:
        """The same snapshot with every file path passed through ``change``."""
        return replace(
            self,
            keyed=[replace(f, path=change(f.path)) for f in self.keyed],
            operator_state=[replace(f, path=change(f.path)) for f in self.operator_state],
            timers=change(self.timers) if self.timers is not None else None,
        )

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> OperatorSnapshot:
        """Inverse of ``dataclasses.asdict`` (paths as they are recorded)."""
        return cls(
            operator=document["operator"],
            keyed=[StateFile(**s) for s in document["keyed"]],
            operator_state=[StateFile(**s) for s in document["operator_state"]],
            timers=document["timers"],
        )


@dataclass(frozen=True)
class TaskSnapshot:
    """A subtask's acknowledged snapshot of one checkpoint, savepoint or final checkpoint."""

    checkpoint_id: int
    kind: SnapshotKind
    final: bool
    task_name: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    directory: str
    operators: dict[str, OperatorSnapshot]
    size_bytes: int = 0
    key_groups: list[int] | None = None
    """[first, last + 1) of the key groups this subtask owned: every keyed state and timer
    file it wrote holds rows of these key groups only (None in manifests from before)."""
    ended_inputs: list[int] = field(default_factory=list)
    """The task's inputs whose end_input was already called (each input ends once in the
    job's life, FLIP-147), so a restored task does not call it again."""
    finished_at: int | None = None
    """The checkpoint in which the subtask finished (its final snapshot), if it did; a
    finished subtask later acknowledges with empty state, as in Flink (FLIP-147)."""

    def key_group_range(self) -> range:
        """The key groups this subtask owned (from the manifest, else from its parallelism)."""
        if self.key_groups is not None:
            return range(self.key_groups[0], self.key_groups[1])
        return key_group_range(self.subtask_index, self.parallelism, self.max_parallelism)

    def operator(self, name: str) -> OperatorSnapshot | None:
        """The snapshot of operator ``name``, if the chain had it."""
        return self.operators.get(name)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the manifest file's content, written in ``directory``).

        Paths under ``directory`` are recorded relative to it (``directory`` itself as
        ``.``), so the folder can move; the snapshot in memory keeps full paths."""

        def relative(path: str) -> str:
            return relative_path(self.directory, path)

        document = asdict(self)
        document["directory"] = relative(self.directory)
        document["operators"] = {
            k: asdict(v.with_paths(relative)) for k, v in self.operators.items()
        }
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any], folder: str) -> TaskSnapshot:
        """Inverse of ``to_json`` for a manifest read in ``folder``: every relative path
        resolved under where the manifest really is, full (older) paths as they are."""

        def resolve(path: str) -> str:
            return resolve_path(folder, path)

        operators = {
            k: OperatorSnapshot.from_json(v).with_paths(resolve)
            for k, v in document["operators"].items()
        }
        directory = resolve(document["directory"])
        return cls(**{**document, "directory": directory, "operators": operators})


@dataclass(frozen=True)
class TaskRestore:
    """What a subtask restores from: the snapshots of checkpoint ``checkpoint_id``.

    ``snapshots`` are those of the old subtasks whose state may move here (one, at equal
    parallelism); ``aborted`` lists later checkpoints that never completed, notified
    right after open so 2PC writers can drop what they prepared.
    """

    checkpoint_id: int
    snapshots: list[TaskSnapshot]
    aborted: list[int] = field(default_factory=list)
    finished_at: int | None = None
    """The checkpoint the subtask finished in, if it stays finished in the restored run:
    it then runs no operator, as a subtask of a fully finished vertex (FLIP-147)."""

    def __post_init__(self) -> None:
        if any(a <= self.checkpoint_id for a in self.aborted):
            raise ValueError(
                f"aborted checkpoints {self.aborted} must be above the restored "
                f"checkpoint {self.checkpoint_id}"
            )

    def ended_inputs(self, subtask_index: int, parallelism: int) -> set[int]:
        """Inputs whose end_input was called before, so the restored subtask does not call
        it again: at unchanged parallelism those its own old subtask ended (an input can
        end in one subtask only, FLIP-147), after a rescale those every old subtask ended;
        none if they all finished (a new run over a final savepoint)."""
        own = [
            s
            for s in self.snapshots
            if (s.subtask_index, s.parallelism) == (subtask_index, parallelism)
        ]
        rescaled = any(s.parallelism != parallelism for s in self.snapshots)
        relevant = self.snapshots if rescaled or not own else own
        if not relevant or all(s.finished_at is not None for s in relevant):
            return set()
        return set.intersection(*(set(s.ended_inputs) for s in relevant))

    def operator_snapshots(self, operator: str) -> list[OperatorSnapshot]:
        """Every old subtask's snapshot of ``operator`` (empty if it is new)."""
        return [s.operators[operator] for s in self.snapshots if operator in s.operators]


@dataclass(frozen=True)
class TaskAcknowledgement:
    """A subtask's answer to a barrier: where its snapshot is and what its sinks prepared.

    ``finished`` is true when the subtask's input really ended and it finished (the final
    checkpoint); ``committables`` maps a sink operator's name to its JSON committables.
    """

    checkpoint_id: int
    task_name: str
    subtask_index: int
    attempt_id: int
    manifest_path: str
    size_bytes: int
    finished: bool
    committables: dict[str, list[Any]] = field(default_factory=dict)
    records_out: int = 0
    records_in: int = 0
    """Records the subtask read in this epoch: from its channels, or from its source."""
    duration_seconds: float = 0.0
    finished_at: int | None = None
    """The checkpoint the subtask finished in (its final snapshot), if it finished."""
    lifecycle_phases: dict[str, list[float]] = field(default_factory=dict)
    """Each invoke phase (setup, initialize_state, open, run, finish, snapshot, close, ...)
    -> [start, end] in wall-clock seconds; one entry per phase, never per record."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """The subtask's metrics of the epoch (core/metrics/subtask.py); empty when off."""
    vertex: int | None = None
    """The acknowledging vertex's id, set as the acknowledgement leaves its task."""
    manifest: dict[str, Any] | None = field(default=None, compare=False)
    """The manifest's document as the subtask wrote it: the run's next epoch restores from
    it without reading the file back (a request on an object store). Never in metadata."""

    @property
    def attempt(self) -> tuple[str, int, int]:
        """The (task, subtask, attempt) the acknowledgement comes from."""
        return self.task_name, self.subtask_index, self.attempt_id

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the ACK message's payload and a checkpoint metadata entry."""
        document = asdict(self)
        for optional in ("vertex", "manifest"):
            if document[optional] is None:
                del document[optional]
        return document

    @classmethod
    def from_json(cls, document: Any) -> TaskAcknowledgement:
        """Inverse of ``to_json``, strict: a field every acknowledgement carried from the
        first missing, one of the wrong type, or one unknown is a CheckpointError naming
        the subtask; fields added since default (older checkpoint metadata lacks them)."""
        if not isinstance(document, dict):
            raise CheckpointError(f"an acknowledgement is no JSON object: {document!r:.80}")
        who = _subtask_named(document)
        unknown = sorted(set(document) - set(_FIELDS))
        if unknown:
            raise CheckpointError(f"the acknowledgement of {who} has unknown fields {unknown}")
        for name, types in _FIELDS.items():
            if name not in document:
                if name in _REQUIRED:
                    raise CheckpointError(f"the acknowledgement of {who} lacks {name!r}")
            elif not _is_a(document[name], types):
                raise CheckpointError(
                    f"the acknowledgement of {who} has {name!r} = {document[name]!r:.80}, "
                    f"not of type {' or '.join(t.__name__ for t in types)}"
                )
        return cls(**document)


def read_acknowledgements(documents: Any, metadata: str) -> list[TaskAcknowledgement]:
    """The acknowledgements the metadata file ``metadata`` records, manifest paths resolved
    under its folder; a damaged one is a CheckpointError naming the file and the subtask."""
    folder = parent_folder(metadata)
    try:
        return [
            replace(ack, manifest_path=resolve_path(folder, ack.manifest_path))
            for ack in map(TaskAcknowledgement.from_json, documents)
        ]
    except (CheckpointError, TypeError, ValueError) as error:
        raise CheckpointError(f"the checkpoint metadata {metadata} is damaged: {error}") from error


_REQUIRED = (
    "checkpoint_id",
    "task_name",
    "subtask_index",
    "attempt_id",
    "manifest_path",
    "size_bytes",
    "finished",
    "committables",
    "records_out",
)
"""The fields every acknowledgement has carried since the first checkpoint format."""
_FIELDS: dict[str, tuple[type, ...]] = {
    "checkpoint_id": (int,),
    "task_name": (str,),
    "subtask_index": (int,),
    "attempt_id": (int,),
    "manifest_path": (str,),
    "size_bytes": (int,),
    "finished": (bool,),
    "committables": (dict,),
    "records_out": (int,),
    "records_in": (int,),
    "duration_seconds": (float, int),
    "finished_at": (int, type(None)),
    "lifecycle_phases": (dict,),
    "metrics": (dict,),
    "vertex": (int, type(None)),
    "manifest": (dict, type(None)),
}
"""Each field of an acknowledgement in JSON and the types it may have there."""


def _is_a(value: Any, types: tuple[type, ...]) -> bool:
    """``isinstance``, except that a bool is no int (JSON keeps them apart)."""
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _subtask_named(document: dict[str, Any]) -> str:
    """'task' subtask N as far as a (maybe damaged) acknowledgement names it."""
    task = document.get("task_name", "<no task_name>")
    return f"{task!r} subtask {document.get('subtask_index', '<no subtask_index>')}"


def relative_manifests(
    folder: str, acknowledgements: list[TaskAcknowledgement]
) -> list[dict[str, Any]]:
    """Acknowledgements as metadata in ``folder`` records them: manifests under it relative."""
    return [
        replace(
            ack, manifest_path=relative_path(folder, ack.manifest_path), manifest=None
        ).to_json()
        for ack in acknowledgements
    ]
