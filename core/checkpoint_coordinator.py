"""The driver's checkpoint coordinator: completes a checkpoint once every subtask
acknowledged it, writes its metadata atomically, then has the sinks commit."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint_storage import CheckpointStorage, safe_name
from flintlock.core.errors import FlintlockError
from flintlock.core.sink_api import CommitContext, TwoPhaseCommitSink

METADATA = "_metadata.json"
COMMITTED = "_committed.json"


class CheckpointError(FlintlockError):
    """A checkpoint cannot complete (a subtask's acknowledgement is missing or twice)."""


class CommitError(FlintlockError):
    """A sink's commit failed; the job is not finished until it succeeds."""


@dataclass
class CompletedCheckpoint:
    """A checkpoint whose metadata was written: what every subtask acknowledged."""

    checkpoint_id: int
    run_id: str
    final: bool
    acknowledgements: list[dict[str, Any]]
    committables: dict[str, list[Any]] = field(default_factory=dict)
    committed: bool = False


class CheckpointCoordinator:
    """Completes and commits the checkpoints of one job (checkpoint dir, job name)."""

    def __init__(self, storage: CheckpointStorage, job_name: str) -> None:
        self.storage = storage
        self.job_name = job_name
        self.directory = f"{storage.base_path}/{safe_name(job_name)}/checkpoints"

    def complete(
        self,
        checkpoint_id: int,
        run_id: str,
        final: bool,
        acknowledgements: list[dict[str, Any]],
        expected: set[tuple[str, int]],
    ) -> CompletedCheckpoint:
        """Check every expected subtask acknowledged once; write the metadata atomically."""
        seen: dict[tuple[str, int], dict[str, Any]] = {}
        for ack in acknowledgements:
            key = (ack["task_name"], ack["subtask_index"])
            if key in seen:
                raise CheckpointError(f"checkpoint {checkpoint_id}: {key} acknowledged twice")
            if ack["checkpoint_id"] != checkpoint_id:
                raise CheckpointError(
                    f"checkpoint {checkpoint_id}: {key} acknowledged {ack['checkpoint_id']}"
                )
            seen[key] = ack
        missing = sorted(expected - set(seen))
        if missing:
            raise CheckpointError(f"checkpoint {checkpoint_id}: no acknowledgement from {missing}")
        ordered = [seen[key] for key in sorted(seen)]
        committables: dict[str, list[Any]] = {}
        for ack in ordered:
            for sink, items in ack["committables"].items():
                committables.setdefault(sink, []).extend(items)
        checkpoint = CompletedCheckpoint(checkpoint_id, run_id, final, ordered, committables)
        folder = f"{self.directory}/chk-{checkpoint_id}"
        document = {
            "job_name": self.job_name,
            "checkpoint_id": checkpoint_id,
            "run_id": run_id,
            "final": final,
            "acknowledgements": ordered,
            "committables": committables,
        }
        self.storage.write_json(f"{folder}/{METADATA}.inprogress", document)
        self.storage.filesystem.move(f"{folder}/{METADATA}.inprogress", f"{folder}/{METADATA}")
        return checkpoint

    def commit(self, checkpoint: CompletedCheckpoint, sinks: dict[str, TwoPhaseCommitSink]) -> None:
        """Commit each sink's committables of ``checkpoint``, then post_commit; idempotent."""
        context = CommitContext(
            self.job_name, checkpoint.run_id, checkpoint.checkpoint_id, self.storage
        )
        for name, sink in sorted(sinks.items()):
            try:
                sink.commit(context, checkpoint.committables.get(name, []))
                sink.post_commit(context)
            except Exception as error:
                raise CommitError(
                    f"sink '{name}' failed to commit checkpoint {checkpoint.checkpoint_id} of "
                    f"job '{self.job_name}': {type(error).__name__}: {error}; start the job "
                    f"again on the same checkpoint directory to complete the commit"
                ) from error
        path = f"{self.directory}/chk-{checkpoint.checkpoint_id}/{COMMITTED}"
        self.storage.write_json(path, {"checkpoint_id": checkpoint.checkpoint_id})
        checkpoint.committed = True

    def latest(self) -> CompletedCheckpoint | None:
        """The completed checkpoint with the highest id, if any."""
        selector = pafs.FileSelector(self.directory, allow_not_found=True)
        ids = sorted(
            int(info.base_name.removeprefix("chk-"))
            for info in self.storage.filesystem.get_file_info(selector)
            if info.type == pafs.FileType.Directory and info.base_name.startswith("chk-")
        )
        for checkpoint_id in reversed(ids):
            folder = f"{self.directory}/chk-{checkpoint_id}"
            info = self.storage.filesystem.get_file_info(f"{folder}/{METADATA}")
            if info.type != pafs.FileType.File:
                continue
            document = self.storage.read_json(f"{folder}/{METADATA}")
            committed = (
                self.storage.filesystem.get_file_info(f"{folder}/{COMMITTED}").type
                == pafs.FileType.File
            )
            return CompletedCheckpoint(
                document["checkpoint_id"],
                document["run_id"],
                document["final"],
                document["acknowledgements"],
                document["committables"],
                committed,
            )
        return None

    def all_committables(self) -> dict[str, list[Any]]:
        """Committables of every completed checkpoint (kept when aborting leftovers)."""
        latest = self.latest()
        return {} if latest is None else json.loads(json.dumps(latest.committables))
