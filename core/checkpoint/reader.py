"""Read a completed checkpoint or savepoint offline: its metadata and manifests (its state:
``state_reader.py``).

No Spark and no job are needed: the layout is documented in CONTRIBUTING.md ("Checkpoint
format"). Every read checks what it reads and names the file that is missing, damaged or
of another job or subtask, so a restore can refuse before anything runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock.core.checkpoint.coordinator import COMMITTED, METADATA
from flintlock.core.checkpoint.fences import CHECKPOINT_FOLDER, is_fence
from flintlock.core.checkpoint.job_folder import IDENTITY
from flintlock.core.checkpoint.paths import parent_folder
from flintlock.core.checkpoint.retries import retrying
from flintlock.core.checkpoint.snapshots import (
    TaskAcknowledgement,
    TaskSnapshot,
    read_acknowledgements,
)
from flintlock.core.checkpoint.storage import CheckpointStorage, list_folder
from flintlock.core.errors import CheckpointError
from flintlock.core.storage.whole_objects import is_object_store

MANIFEST_READS = 8
"""Manifests read at once from an object store."""


@dataclass(frozen=True)
class OperatorInfo:
    """One operator of a checkpoint: its uid, name, vertex and the states it holds."""

    uid: str
    name: str
    vertex: str
    parallelism: int
    states: dict[str, str]
    """State name -> kind: a keyed kind (``value``, ``list`` ...) or ``operator-split`` /
    ``operator-union`` for operator list state."""
    has_timers: bool

    @property
    def has_state(self) -> bool:
        """True if any subtask wrote state or timers for it."""
        return bool(self.states) or self.has_timers


@dataclass(frozen=True)
class Checkpoint:
    """A completed checkpoint or savepoint as stored: its metadata and every manifest."""

    path: str
    storage: CheckpointStorage
    job_name: str
    job_id: str
    checkpoint_id: int
    run_id: str
    final: bool
    committed: bool
    max_parallelism: int
    subtasks: list[TaskSnapshot]
    uids: dict[str, str]
    """Operator name -> uid (the name where the metadata records none)."""
    sources: dict[str, Any] = field(default_factory=dict)
    """Unbounded source uid -> its enumerator's JSON state: where the next epoch starts."""
    kind: str = "checkpoint"
    """``savepoint`` for a savepoint's own folder and for the job's entry of one."""
    savepoint: str | None = None
    """The savepoint's folder: ``path`` itself, or the one a job's ``chk-<N>`` names."""

    def operators(self) -> dict[str, OperatorInfo]:
        """Every operator any subtask snapshotted, by name."""
        found: dict[str, OperatorInfo] = {}
        for snapshot in self.subtasks:
            for name, operator in snapshot.operators.items():
                known = found.get(name)
                states = dict(known.states) if known else {}
                states.update({f.name: f.kind for f in operator.keyed})
                states.update({f.name: f"operator-{f.mode}" for f in operator.operator_state})
                found[name] = OperatorInfo(
                    uid=self.uids.get(name, name),
                    name=name,
                    vertex=snapshot.task_name,
                    parallelism=snapshot.parallelism,
                    states=states,
                    has_timers=bool(operator.timers) or bool(known and known.has_timers),
                )
        return found

    def operator(self, name_or_uid: str) -> OperatorInfo:
        """The operator with this uid (or, failing that, this name); an error listing them."""
        operators = self.operators()
        for info in operators.values():
            if info.uid == name_or_uid:
                return info
        if name_or_uid in operators:
            return operators[name_or_uid]
        raise CheckpointError(
            f"checkpoint {self.path} has no operator {name_or_uid!r}; its operators (uid) are "
            f"{sorted(i.uid for i in operators.values())}"
        )


@dataclass(frozen=True)
class CheckpointSummary:
    """One ``chk-<N>`` folder of a job, as ``flintlock checkpoints list`` shows it."""

    job_name: str
    checkpoint_id: int
    path: str
    completed: bool
    final: bool = False
    committed: bool = False
    run_id: str = ""
    subtasks: int = 0
    savepoint: str | None = None
    """The savepoint's own folder, if this checkpoint is one."""


def storage_for(path: str) -> CheckpointStorage:
    """Storage rooted at ``path``: a local path (relative ones too) or a pyarrow.fs URI
    (``s3://bucket/folder?endpoint_override=...``); one pyarrow cannot open is an error."""
    if "://" not in path:
        path = os.path.abspath(path)
    try:
        return CheckpointStorage.from_uri(path)
    except (pa.ArrowException, ValueError, OSError) as error:
        raise CheckpointError(f"{path} names no file system pyarrow can open: {error}") from error


def storage_at(path: str, storage: CheckpointStorage | None) -> CheckpointStorage:
    """Storage rooted at ``path``: a path on ``storage``'s file system when given (a path
    inside a job's folder, or its URI as ``storage.uri`` writes it), else a local path or
    a URI."""
    if storage is None:
        return storage_for(path)
    return CheckpointStorage(storage.filesystem, storage.path_of(path) or path, storage.uri_prefix)


def load_checkpoint(
    path: str,
    storage: CheckpointStorage | None = None,
    *,
    own_job: bool = False,
    published: dict[str, Any] | None = None,
    sent: Sequence[TaskAcknowledgement] = (),
) -> Checkpoint:
    """The checkpoint at ``path``: a ``chk-<N>`` folder, or a job's folder (its latest).

    ``path`` is a local path or URI, or, with ``storage``, a path on its file system.
    Its metadata and every subtask's manifest are read and checked: missing, damaged and
    foreign (another job's, checkpoint's or subtask's) files are CheckpointErrors naming
    the file. ``own_job``: the driver reads a checkpoint its job folder holds (its
    identity checked at the start; ``committed`` left False), in fewer requests, from
    the metadata it ``published`` and the manifests its subtasks ``sent`` in their
    acknowledgements, if given."""
    storage = storage_at(path, storage)
    document = published or storage.read_json(f"{storage.base_path}/{METADATA}", if_there=True)
    folder = storage.base_path
    if document is None:  # a job's folder: its latest completed checkpoint
        folder = checkpoint_folder(storage, storage.base_path)
        document = storage.read_json(f"{folder}/{METADATA}")
    metadata = f"{folder}/{METADATA}"
    if is_fence(document):
        raise CheckpointError(
            f"{folder} is no checkpoint: its id was fenced by run {document.get('run_id')} "
            f"when it took the job's lease over, and nothing completed there"
        )
    try:
        job_name, job_id = str(document["job_name"]), str(document["job_id"])
        checkpoint_id = int(document["checkpoint_id"])
        recorded = document["acknowledgements"]
        run_id, final = str(document["run_id"]), bool(document["final"])
        described = dict(document.get("operators") or {})
        kind = str(document.get("kind", "checkpoint"))
        savepoint = _savepoint_folder(document, folder)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(
            f"the checkpoint metadata {metadata} is damaged: {error!r}"
        ) from error
    match = CHECKPOINT_FOLDER.fullmatch(folder.rsplit("/", 1)[-1])
    if match is not None and int(match.group(1)) != checkpoint_id:
        raise CheckpointError(
            f"the checkpoint metadata {metadata} is of checkpoint {checkpoint_id}, not "
            f"chk-{match.group(1)}: it was copied from another checkpoint"
        )
    if not own_job:
        _check_job_identity(storage, folder, metadata, job_name, job_id)
    acknowledgements = read_acknowledgements(recorded, metadata)
    known = {ack.attempt: ack.manifest for ack in sent if ack.manifest is not None}
    subtasks = _read_manifests(storage, acknowledgements, checkpoint_id, metadata, known)
    default_max = subtasks[0].max_parallelism if subtasks else 128
    return Checkpoint(
        path=folder,
        storage=storage,
        job_name=job_name,
        job_id=job_id,
        checkpoint_id=checkpoint_id,
        run_id=run_id,
        final=final,
        committed=not own_job and storage.exists(f"{folder}/{COMMITTED}"),
        max_parallelism=int(document.get("max_parallelism") or default_max),
        subtasks=subtasks,
        uids={name: str(entry.get("uid", name)) for name, entry in described.items()},
        sources=dict(document.get("sources") or {}),
        kind=kind,
        savepoint=savepoint,
    )


def checkpoint_folder(storage: CheckpointStorage, path: str) -> str:
    """``path`` if it holds checkpoint metadata; a job folder's latest completed checkpoint."""
    if storage.exists(f"{path}/{METADATA}"):
        return path
    checkpoints = f"{path}/checkpoints"
    if _is_dir(storage, checkpoints):
        completed = [c for c in list_job_checkpoints(storage, path) if c.completed]
        if not completed:
            raise CheckpointError(f"the job folder {path} holds no completed checkpoint")
        return completed[-1].path
    raise CheckpointError(
        f"{path} is neither a checkpoint (a chk-<N> folder with {METADATA}) nor a job's "
        f"folder (with checkpoints/): give one of them"
    )


def list_checkpoints(
    path: str, storage: CheckpointStorage | None = None
) -> list[CheckpointSummary]:
    """Every ``chk-<N>`` of the job folder ``path``, or of every job under a checkpoint
    directory, oldest first; incomplete ones (no metadata) too. ``path`` as in
    ``load_checkpoint``."""
    storage = storage_at(path, storage)
    base = storage.base_path
    if _is_dir(storage, f"{base}/checkpoints"):
        return list_job_checkpoints(storage, base)
    if storage.exists(f"{base}/{METADATA}"):  # one checkpoint or savepoint folder
        return [_summary(storage.read_json(f"{base}/{METADATA}"), base, storage, None)]
    if not _is_dir(storage, base):
        raise CheckpointError(f"there is no folder at {path}")
    selector = pafs.FileSelector(base)
    summaries = []
    for info in sorted(storage.filesystem.get_file_info(selector), key=lambda i: i.path):
        if info.type == pafs.FileType.Directory and storage.exists(f"{info.path}/{IDENTITY}"):
            summaries += list_job_checkpoints(storage, info.path)
    return summaries


def list_job_checkpoints(storage: CheckpointStorage, job_folder: str) -> list[CheckpointSummary]:
    """The checkpoints of one job folder, by id; anything else there is an error naming it."""
    directory = f"{job_folder}/checkpoints"
    found = []
    for info in list_folder(storage.filesystem, directory):
        match = CHECKPOINT_FOLDER.fullmatch(info.base_name)
        if match is None or info.type != pafs.FileType.Directory:
            raise CheckpointError(f"{info.path} does not belong in a checkpoints folder")
        found.append((int(match.group(1)), info.path))
    summaries = []
    for checkpoint_id, folder in sorted(found):
        metadata = f"{folder}/{METADATA}"
        document = storage.read_json(metadata) if storage.exists(metadata) else None
        if document is None or is_fence(document):
            summaries.append(CheckpointSummary("?", checkpoint_id, folder, completed=False))
            continue
        summaries.append(_summary(document, folder, storage, checkpoint_id))
    return summaries


def _summary(
    document: Any, folder: str, storage: CheckpointStorage, checkpoint_id: int | None
) -> CheckpointSummary:
    """What ``list`` shows of the metadata ``document`` read in ``folder`` (of checkpoint
    ``checkpoint_id``: its chk-<N> folder's; None: the one the metadata names)."""
    try:
        return CheckpointSummary(
            job_name=str(document["job_name"]),
            checkpoint_id=int(document["checkpoint_id"])
            if checkpoint_id is None
            else checkpoint_id,
            path=folder,
            completed=True,
            final=bool(document["final"]),
            committed=storage.exists(f"{folder}/{COMMITTED}"),
            run_id=str(document["run_id"]),
            subtasks=len(document["acknowledgements"]),
            savepoint=_savepoint_folder(document, folder),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(
            f"the checkpoint metadata {folder}/{METADATA} is damaged: {error!r}"
        ) from error


def _savepoint_folder(document: dict[str, Any], folder: str) -> str | None:
    """A savepoint's folder: where its own metadata lies, or what a job's chk-<N> names."""
    if "savepoint" in document:
        return str(document["savepoint"])
    return folder if document.get("kind") == "savepoint" else None


def _read_manifests(
    storage: CheckpointStorage,
    acknowledgements: list[TaskAcknowledgement],
    checkpoint_id: int,
    metadata: str,
    known: dict[tuple[str, int, int], dict[str, Any]],
) -> list[TaskSnapshot]:
    """Every subtask's manifest, in the acknowledgements' order: the ``known`` documents
    (by attempt) as they are, the others read, on an object store a few at a time (each
    is a request's round trip, and a run reads them between two epochs)."""

    def read(ack: TaskAcknowledgement) -> TaskSnapshot:
        return _read_manifest(storage, ack, checkpoint_id, metadata, known.get(ack.attempt))

    unknown = sum(ack.attempt not in known for ack in acknowledgements)
    if unknown < 2 or not is_object_store(storage.filesystem):
        return [read(ack) for ack in acknowledgements]
    with ThreadPoolExecutor(max_workers=min(MANIFEST_READS, len(acknowledgements))) as pool:
        return list(pool.map(read, acknowledgements))


def _read_manifest(
    storage: CheckpointStorage,
    ack: TaskAcknowledgement,
    checkpoint_id: int,
    metadata: str,
    document: dict[str, Any] | None = None,
) -> TaskSnapshot:
    path, task, subtask = ack.manifest_path, ack.task_name, ack.subtask_index
    if document is None:
        document = storage.read_json(path)
    try:
        snapshot = TaskSnapshot.from_json(document, parent_folder(path))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(f"the snapshot manifest {path} is damaged: {error!r}") from error
    found = (snapshot.checkpoint_id, snapshot.task_name, snapshot.subtask_index)
    if found != (checkpoint_id, task, subtask):
        raise CheckpointError(
            f"the snapshot manifest {path} is of checkpoint {found[0]}, '{found[1]}' subtask "
            f"{found[2]}, but {metadata} lists it for checkpoint {checkpoint_id}, '{task}' "
            f"subtask {subtask}: it belongs to another checkpoint"
        )
    return snapshot


def _check_job_identity(
    storage: CheckpointStorage, folder: str, metadata: str, job_name: str, job_id: str
) -> None:
    """Metadata inside a job's folder must be that job's (not copied from another)."""
    parts = folder.rsplit("/", 2)
    if len(parts) != 3 or parts[1] != "checkpoints":
        return  # a savepoint or a copied checkpoint folder: it has no job folder around it
    identity = f"{parts[0]}/{IDENTITY}"
    if not storage.exists(identity):
        return
    document = storage.read_json(identity)
    if not isinstance(document, dict):
        raise CheckpointError(f"the job identity file {identity} is damaged")
    if (document.get("job_name"), document.get("job_id")) != (job_name, job_id):
        raise CheckpointError(
            f"the checkpoint metadata {metadata} names job {job_name!r} (id {job_id}), but it "
            f"lies in the folder of job {document.get('job_name')!r} (id "
            f"{document.get('job_id')}, {identity}): it was copied from another job"
        )


def _is_dir(storage: CheckpointStorage, path: str) -> bool:
    info = retrying(path, "look up", lambda: storage.filesystem.get_file_info(path))
    return bool(info.type == pafs.FileType.Directory)
