"""The driver's checkpoint coordinator: completes a checkpoint once every subtask
acknowledged it, writes its metadata atomically, then has the sinks commit.

It runs on the driver, as Flink's runs in the JobMaster: a Spark task cannot wait for the
driver, so acknowledgements travel in-band and only the driver sees all of an epoch's.
Sinks commit only after the metadata is published, in checkpoint order, so what a sink
commits always belongs to a completed checkpoint that a restart finds."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pyarrow.fs as pafs

from flintlock.core.api.sink import CommitContext, TwoPhaseCommitSink
from flintlock.core.checkpoint.commit_log import CommitLog
from flintlock.core.checkpoint.fences import (
    CHECKPOINT_FOLDER,
    fence_next,
    highest_folder_id,
    is_fence,
    publish_once,
)
from flintlock.core.checkpoint.finished_subtasks import fully_finished, subtasks_finished
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.paths import lies_under, parent_folder
from flintlock.core.checkpoint.retries import tried_again
from flintlock.core.checkpoint.savepoints import discard_savepoint_metadata
from flintlock.core.checkpoint.snapshots import (
    TaskAcknowledgement,
    read_acknowledgements,
    relative_manifests,
)
from flintlock.core.checkpoint.storage import list_folder
from flintlock.core.errors import CheckpointError, CommitError, CommittableError

METADATA = "_metadata.json"
COMMITTED = "_committed.json"
RUN_FOLDER = re.compile(r"[0-9a-f]{12}")
"""A run's folder in the job's folder (``JobMaster.new_run_id``)."""

__all__ = ["CheckpointCoordinator", "CheckpointError", "CommitError", "CompletedCheckpoint"]


@dataclass
class CompletedCheckpoint:
    """A checkpoint whose metadata was written: what every subtask acknowledged."""

    checkpoint_id: int
    run_id: str
    final: bool
    acknowledgements: list[TaskAcknowledgement]
    committables: dict[str, list[Any]] = field(default_factory=dict)
    committed: bool = False
    savepoint: str | None = None
    """The savepoint's own folder if checkpoint N is a savepoint (never deleted by retain)."""
    sources: dict[str, Any] = field(default_factory=dict)
    """Unbounded source uid -> its enumerator's JSON state after this checkpoint."""
    commit_seconds: dict[str, float] = field(default_factory=dict)
    """Sink name -> the seconds its commit and post-commit took, once this driver did it."""

    def finished_vertices(self) -> dict[str, int]:
        """Fully finished vertex name -> the checkpoint it finished in (FLIP-147)."""
        return fully_finished(self.acknowledgements, self.checkpoint_id)


class CheckpointCoordinator:
    """Completes and commits the checkpoints of one job (checkpoint dir, job name)."""

    def __init__(self, folder: JobFolder) -> None:
        self.folder = folder
        self.storage = folder.storage
        self.job_name = folder.job_name
        self.directory = folder.checkpoints
        self.commit_log = CommitLog(folder)
        self._documents: dict[str, dict[str, Any]] = {}  # folder -> metadata: created once
        self._committed_through = 0  # every completed checkpoint up to it: committed here

    def complete(
        self,
        checkpoint_id: int,
        run_id: str,
        final: bool,
        acknowledgements: list[TaskAcknowledgement],
        expected: set[tuple[str, int]],
        details: dict[str, Any] | None = None,
        snapshot_root: str | None = None,
    ) -> CompletedCheckpoint:
        """Check every expected subtask acknowledged once; write the metadata atomically.

        ``details`` (operators with their uids, max parallelism, what the run restored
        from) go into the metadata as they are, for restores and offline readers. With a
        ``snapshot_root`` (the folder the tasks wrote a savepoint to) the savepoint's own
        self-contained ``_metadata.json`` is written there first, then the job's
        ``chk-<N>`` metadata naming it, last: the job's recovery sees it as checkpoint N."""
        seen: dict[tuple[str, int], TaskAcknowledgement] = {}
        for ack in acknowledgements:
            key = (ack.task_name, ack.subtask_index)
            if key in seen:
                raise CheckpointError(f"checkpoint {checkpoint_id}: {key} acknowledged twice")
            if ack.checkpoint_id != checkpoint_id:
                raise CheckpointError(
                    f"checkpoint {checkpoint_id}: {key} acknowledged {ack.checkpoint_id}"
                )
            seen[key] = ack
        missing = sorted(expected - set(seen))
        if missing:
            raise CheckpointError(f"checkpoint {checkpoint_id}: no acknowledgement from {missing}")
        ordered = [seen[key] for key in sorted(seen)]
        committables: dict[str, list[Any]] = {}
        for ack in ordered:
            for sink, items in ack.committables.items():
                committables.setdefault(sink, []).extend(items)
        checkpoint = CompletedCheckpoint(
            checkpoint_id,
            run_id,
            final,
            ordered,
            committables,
            savepoint=snapshot_root,
            sources=dict((details or {}).get("sources") or {}),
        )
        document = {
            "job_name": self.job_name,
            "job_id": self.folder.job_id,
            "checkpoint_id": checkpoint_id,
            "kind": "savepoint" if snapshot_root else "checkpoint",
            "run_id": run_id,
            "final": final,
            "finished_vertices": fully_finished(ordered, checkpoint_id),
            "finished_subtasks": subtasks_finished(ordered, checkpoint_id),
            **(details or {}),
        }
        label = "savepoint" if snapshot_root else "final checkpoint" if final else "checkpoint"
        savepoint_metadata = None
        if snapshot_root is not None:
            savepoint_metadata = self._write_savepoint(snapshot_root, document, ordered)
        path = self.folder.checkpoint_file(checkpoint_id, METADATA)
        document["acknowledgements"] = relative_manifests(parent_folder(path), ordered)
        document["committables"] = committables
        if snapshot_root is not None:
            document["savepoint"] = snapshot_root
        try:
            self._publish(path, document, label, checkpoint_id)
        except CheckpointError as error:
            if savepoint_metadata is not None:  # no savepoint of a checkpoint that failed
                discard_savepoint_metadata(self.storage, savepoint_metadata, error)
            raise
        return checkpoint

    def _write_savepoint(
        self, root: str, document: dict[str, Any], acknowledgements: list[TaskAcknowledgement]
    ) -> str:
        """Write the savepoint's own metadata in ``root``; returns its path.

        Self-contained: every manifest lies under ``root`` and is recorded relative to it.
        State only: committables are committed by the job through its ``chk-<N>``."""
        checkpoint_id = document["checkpoint_id"]
        for ack in acknowledgements:
            if not lies_under(ack.manifest_path, root):
                raise CheckpointError(
                    f"savepoint {checkpoint_id}: '{ack.task_name}' subtask "
                    f"{ack.subtask_index} wrote its snapshot to {ack.manifest_path}, "
                    f"outside the savepoint's folder {root}"
                )
        acks = [replace(ack, committables={}) for ack in acknowledgements]
        path = f"{root}/{METADATA}"
        own = {**document, "acknowledgements": relative_manifests(root, acks)}
        self._write_metadata(path, own, "savepoint", checkpoint_id)
        return path

    def _write_metadata(self, path: str, document: dict[str, Any], label: str, id_: int) -> None:
        self.folder.fence(f"completes the {label} {id_}")
        try:
            self.storage.write_json_atomically(path, document)
        except OSError as error:
            raise CheckpointError(
                f"job '{self.job_name}': the {label} {id_} cannot be written to {path}: {error}"
            ) from error

    def _publish(self, path: str, document: dict[str, Any], label: str, id_: int) -> None:
        publish_once(self.folder, path, document, f"{label} {id_}", id_)
        self._documents[parent_folder(path)] = document  # read back: never changes (S3 GETs)

    def highest_id(self) -> int:
        """The highest checkpoint id ever used here: completed, fenced or committed."""
        last = self.commit_log.last()
        return max(highest_folder_id(self._entries()), last.checkpoint_id if last else 0)

    def fence_next(self, run_id: str) -> int:
        """Occupy the next checkpoint id with a fence (``fences.fence_next``)."""
        self.commit_log.forget()
        self._committed_through = 0
        path_of = partial(self.folder.checkpoint_file, name=METADATA)
        return fence_next(self.folder, run_id, self.highest_id, path_of)

    def published(self, checkpoint_id: int) -> dict[str, Any] | None:
        """The metadata this driver published or read for ``checkpoint_id``, if it has it."""
        return self._documents.get(self.folder.checkpoint_dir(checkpoint_id))

    def _completed_document(self, folder: str) -> dict[str, Any] | None:
        """The metadata of the checkpoint in ``folder``; None if it has none or is a fence."""
        if folder in self._documents:
            return self._documents[folder]
        path = f"{folder}/{METADATA}"
        document = self.storage.read_json(path, if_there=True)
        if document is None or is_fence(document):
            return None
        if not isinstance(document, dict):
            raise CheckpointError(f"the checkpoint metadata {path} is damaged: not an object")
        self._documents[folder] = document
        return document

    def commit(
        self, checkpoint: CompletedCheckpoint, sinks: dict[str, TwoPhaseCommitSink[Any, Any]]
    ) -> None:
        """Commit ``checkpoint``, after every earlier completed checkpoint not committed yet,
        in order (Flink's subsumed checkpoints); idempotent."""
        for earlier in self.uncommitted_before(checkpoint.checkpoint_id):
            self._commit_one(earlier, sinks)
        self._commit_one(checkpoint, sinks)
        self._committed_through = checkpoint.checkpoint_id

    def uncommitted_before(self, checkpoint_id: int) -> list[CompletedCheckpoint]:
        """The completed checkpoints below ``checkpoint_id`` whose commit is pending, oldest
        first. None if this driver committed every one up to ``checkpoint_id - 1``."""
        if 0 < self._committed_through == checkpoint_id - 1:
            return []
        pending = []
        for info in self._entries():
            match = CHECKPOINT_FOLDER.fullmatch(info.base_name)
            if match is None or int(match.group(1)) >= checkpoint_id:
                continue
            earlier = int(match.group(1))
            if self.commit_log.contains(earlier):
                continue
            document = self._completed_document(info.path)
            if document is not None and not self.storage.exists(f"{info.path}/{COMMITTED}"):
                pending.append(self._read(earlier, info.path, document))
        return sorted(pending, key=lambda c: c.checkpoint_id)

    def _commit_one(
        self, checkpoint: CompletedCheckpoint, sinks: dict[str, TwoPhaseCommitSink[Any, Any]]
    ) -> None:
        """Each sink's commit and post_commit of ``checkpoint``, then the commit record."""
        context = self.commit_context(checkpoint.run_id, checkpoint.checkpoint_id)
        for name, sink in sorted(sinks.items()):
            committables = checkpoint.committables.get(name, [])
            self.folder.fence(f"commits checkpoint {checkpoint.checkpoint_id} to sink '{name}'")
            started = time.monotonic()
            try:
                tried_again(partial(sink.commit, context.for_sink(name), committables))
                sink.post_commit(context.for_sink(name), committables)
                checkpoint.commit_seconds[name] = round(time.monotonic() - started, 4)
            except CommittableError as error:
                raise CommittableError(
                    f"sink '{name}' cannot commit checkpoint {checkpoint.checkpoint_id} of job "
                    f"'{self.job_name}': {error}"
                ) from error
            except Exception as error:
                raise CommitError(
                    f"sink '{name}' failed to commit checkpoint {checkpoint.checkpoint_id} of "
                    f"job '{self.job_name}': {type(error).__name__}: {error}; start the job "
                    f"again on the same checkpoint directory to complete the commit"
                ) from error
        path = self.folder.checkpoint_file(checkpoint.checkpoint_id, COMMITTED)
        self.storage.write_json_atomically(path, {"checkpoint_id": checkpoint.checkpoint_id})
        self.commit_log.record(checkpoint.checkpoint_id, checkpoint.run_id)
        checkpoint.committed = True

    def commit_context(self, run_id: str, checkpoint_id: int) -> CommitContext:
        """What a sink's committer (or its output check) is told about the job."""
        return CommitContext(
            self.job_name, run_id, checkpoint_id, self.storage, job_id=self.folder.job_id
        )

    def retain(self, keep: int) -> list[int]:
        """Delete the completed checkpoints older than the newest ``keep``; their ids.

        Called once the newest checkpoint is committed, so no pending commit needs an
        older one. The metadata goes first (the checkpoint is no longer completed), then
        its subtasks' snapshot files, then its folder. A savepoint's own folder is never
        deleted: it belongs to the user, only its ``chk-<N>`` entry goes."""
        self.folder.fence("deletes old checkpoints")
        completed = []  # fences are never deleted: they keep old drivers out for good
        for info in self._entries():
            match = CHECKPOINT_FOLDER.fullmatch(info.base_name)
            if match is not None and self._completed_document(info.path) is not None:
                completed.append(int(match.group(1)))
        deleted = []
        for checkpoint_id in sorted(completed, reverse=True)[keep:]:
            folder = self.folder.checkpoint_dir(checkpoint_id)
            checkpoint = self._read(checkpoint_id, folder)
            self._documents.pop(folder, None)
            self.storage.delete_file(f"{folder}/{METADATA}")
            for leftover in (
                self.folder.run_checkpoint_dir(checkpoint.run_id, checkpoint_id),
                folder,
            ):
                if checkpoint.savepoint is None or not lies_under(checkpoint.savepoint, leftover):
                    self.storage.delete_dir(leftover)
            deleted.append(checkpoint_id)
        return deleted

    def remove_orphaned_snapshots(self, current_run_id: str) -> list[str]:
        """Delete what runs left in the job's folder that no completed checkpoint needs:
        the folders of dead runs, and their snapshots of checkpoints that never completed
        (each checkpoint's files lie under ``<run id>/chk-<N>``). Returns what went."""
        self.folder.fence("deletes orphaned snapshots")
        needed: dict[str, set[str]] = {}
        for info in self._entries():
            match = CHECKPOINT_FOLDER.fullmatch(info.base_name)
            document = self._completed_document(info.path) if match is not None else None
            if match is not None and document is not None:
                checkpoint = self._read(int(match.group(1)), info.path, document)
                needed.setdefault(checkpoint.run_id, set()).add(info.base_name)
        removed = []
        for run in list_folder(self.storage.filesystem, self.folder.path):
            if run.type != pafs.FileType.Directory or not RUN_FOLDER.fullmatch(run.base_name):
                continue
            if run.base_name == current_run_id:
                continue
            if run.base_name not in needed:
                self.storage.delete_dir(run.path)
                removed.append(run.path)
                continue
            for entry in list_folder(self.storage.filesystem, run.path):
                if entry.base_name not in needed[run.base_name]:
                    if entry.type == pafs.FileType.Directory:
                        self.storage.delete_dir(entry.path)
                    else:
                        self.storage.delete_file(entry.path)
                    removed.append(entry.path)
        return removed

    def _entries(self) -> list[pafs.FileInfo]:
        return list(list_folder(self.storage.filesystem, self.directory))

    def latest(self) -> CompletedCheckpoint | None:
        """The completed checkpoint with the highest id, if any.

        Anything in the checkpoints folder that is not a ``chk-<id>`` folder, and metadata
        that is damaged or of another job, is a CheckpointError naming the file: a
        checkpoint is never skipped silently (an older one would re-run committed data)."""
        self._documents.clear()  # what the storage holds now, damage included
        self._committed_through = 0
        ids = []
        for info in list_folder(self.storage.filesystem, self.directory):
            match = CHECKPOINT_FOLDER.fullmatch(info.base_name)
            if match is None or info.type != pafs.FileType.Directory:
                raise CheckpointError(
                    f"{info.path} does not belong in the checkpoints folder of job "
                    f"'{self.job_name}' (only chk-<id> folders do): move it elsewhere"
                )
            ids.append(int(match.group(1)))
        for checkpoint_id in sorted(ids, reverse=True):
            folder = self.folder.checkpoint_dir(checkpoint_id)
            document = self._completed_document(folder)
            if document is None:
                continue  # never completed (its run stopped before), or a fence
            return self._read(checkpoint_id, folder, document)
        return None

    def _read(self, checkpoint_id: int, folder: str, document: Any = None) -> CompletedCheckpoint:
        """Checkpoint ``checkpoint_id`` from its metadata (``document`` if read already)."""
        path = f"{folder}/{METADATA}"
        if document is None:
            document = self._completed_document(folder) or self.storage.read_json(path)
        try:
            if document["job_name"] != self.job_name or document["job_id"] != self.folder.job_id:
                raise CheckpointError(
                    f"the checkpoint {path} belongs to job {document['job_name']!r} (id "
                    f"{document['job_id']}), not to {self.job_name!r} (id {self.folder.job_id})"
                )
            if document["checkpoint_id"] != checkpoint_id:
                raise ValueError(
                    f"checkpoint_id {document['checkpoint_id']} in folder chk-{checkpoint_id}"
                )
            acknowledgements = read_acknowledgements(document["acknowledgements"], path)
            savepoint = document.get("savepoint")
            checkpoint = CompletedCheckpoint(
                checkpoint_id,
                str(document["run_id"]),
                bool(document["final"]),
                acknowledgements,
                dict(document["committables"]),
                self.commit_log.contains(checkpoint_id)
                or self.storage.exists(f"{folder}/{COMMITTED}"),
                str(savepoint) if savepoint is not None else None,
                dict(document.get("sources") or {}),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(
                f"the checkpoint metadata {path} is damaged: {error!r}"
            ) from error
        return checkpoint
