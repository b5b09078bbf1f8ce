"""The kit's jobs: a sink's subtasks run through the real task lifecycle (the harness's
StreamTask with the registered ``two_phase_commit_sink`` operator), and a driver run that
completes and commits their checkpoints with the real ``CheckpointCoordinator`` on a real
job folder, and starts as flintlock's run start does (``core/job/run_start.py``).

What the kit cannot do in-process it plays as the runtime would see it: each subtask gets
its own copy of the sink (cloudpickled, as Spark ships it), a driver crash is a run that
stops calling, and a restart is a new ``KitRun`` with sinks made anew."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import cloudpickle
import pyarrow.fs as pafs

from flintlock.core.api.sink import OutputCheckContext, TwoPhaseCommitSink
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator, CompletedCheckpoint
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.snapshots import TaskAcknowledgement
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.conformance.target import OutputPlace, SinkTarget, rows
from flintlock.core.harnesses import OneInputHarness
from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import build_registry

EpochEnd = Literal["checkpoint", "final", "savepoint", "drain"]
"""How an epoch ends: a checkpoint the job outlives; the input ends (finish, then the
final checkpoint); a stop with a savepoint (no finish); a stop with drain (finish, then
the savepoint)."""
SOURCE = "conformance-ids"
"""The kit's source in the checkpoint metadata: the next id to read, as a source's offset."""
BATCH_ROWS = 7


@dataclass
class Epoch:
    """One epoch of every sink subtask: what they acknowledged, and where the ids stop."""

    checkpoint_id: int
    final: bool
    acknowledgements: list[TaskAcknowledgement]
    expected: set[tuple[str, int]]
    position: int


class KitJob:
    """One job (checkpoint directory, job name) writing ids ``base``, ``base + 1``, ... to
    its sinks, one per output place (by sink uid), with ``parallelism`` subtasks each."""

    def __init__(
        self,
        target: SinkTarget[Any],
        places: dict[str, OutputPlace],
        checkpoint_dir: str,
        name: str,
        parallelism: int = 2,
        base: int = 0,
    ) -> None:
        self.target = target
        self.places = places
        self.storage = CheckpointStorage(pafs.LocalFileSystem(), checkpoint_dir)
        self.name = name
        self.parallelism = parallelism
        self.base = base
        self.attempts = itertools.count(1)
        registry = build_registry(build_plugin_manager((), use_entry_points=True))
        self.sink_operator: Callable[..., Any] = registry.get("operator", "two_phase_commit_sink")

    def start(self) -> KitRun:
        """A driver starts the job: a new run with its sinks made anew."""
        return KitRun(self)


class KitRun:
    """One driver run of a KitJob. Its start does what flintlock's does: check the
    outputs; commit a completed checkpoint left pending (the coordinator's replay), drop
    what no completed checkpoint references, and continue from it; after a final
    checkpoint, run nothing (``finished``); else a new run: ``prepare_output``."""

    def __init__(self, job: KitJob) -> None:
        self.job = job
        self.folder = JobFolder(job.storage, job.name)
        self.job_id = self.folder.open()
        self.coordinator = CheckpointCoordinator(self.folder)
        self.run_id = uuid.uuid4().hex[:12]
        self.sinks = {uid: self._made(uid, place) for uid, place in job.places.items()}
        latest = self.coordinator.latest()
        self.next_id = self.coordinator.highest_id() + 1
        self.position = job.base
        self.finished = latest is not None and latest.final
        if latest is not None:  # a crash, a stop or the end: commit what is pending
            if not latest.committed or not latest.final:
                self.coordinator.commit(latest, self.sinks)  # idempotent
                self.abort_uncommitted(latest.committables)
            self.position = int(latest.sources[SOURCE]["next"])
        else:
            context = self.coordinator.commit_context(self.run_id, self.next_id)
            for uid, sink in self.sinks.items():
                sink.prepare_output(context.for_sink(uid))
            self.abort_uncommitted({})

    def _made(self, uid: str, place: OutputPlace) -> TwoPhaseCommitSink[Any, Any]:
        sink: TwoPhaseCommitSink[Any, Any] = self.job.target.make_sink(place)
        sink.input_schema = self.job.target.schema
        sink.check_output(OutputCheckContext(self.job.name, uid))
        return sink

    # ---- tasks ----

    def epoch(
        self,
        count: int,
        end: EpochEnd = "checkpoint",
        cancel: int | None = None,
        kill: int | None = None,
    ) -> Epoch:
        """Every sink's subtasks write the next ``count`` ids (round robin, in batches) and
        end the epoch as ``end`` says; subtask ``cancel`` is canceled instead (a task
        failure: its operator closes and aborts the transaction), and subtask ``kill``'s
        worker dies (its transaction is never aborted: a start must clean it up)."""
        checkpoint_id, self.next_id = self.next_id, self.next_id + 1
        ids = list(range(self.position, self.position + count))
        self.position += count
        parallelism = self.job.parallelism
        acknowledgements = []
        for uid, sink in self.sinks.items():
            for subtask in range(parallelism):
                task = self._task(uid, sink, subtask, checkpoint_id, subtask == kill)
                share = ids[subtask::parallelism]
                for first in range(0, len(share), BATCH_ROWS):
                    chunk = share[first : first + BATCH_ROWS]
                    task.process_batch(rows(chunk, self.job.target.schema))
                if subtask in (cancel, kill):
                    task.cancel()
                    continue
                acknowledgements.append(_end_epoch(task, checkpoint_id, end))
        expected = {(uid, i) for uid in self.sinks for i in range(parallelism)}
        final = end in ("final", "drain")
        return Epoch(checkpoint_id, final, acknowledgements, expected, self.position)

    def _task(
        self,
        uid: str,
        sink: TwoPhaseCommitSink[Any, Any],
        subtask: int,
        checkpoint_id: int,
        killed: bool = False,
    ) -> OneInputHarness:
        """One attempt of one sink subtask, with its own copy of the sink (as on Spark);
        a ``killed`` one never gets to abort its transaction."""
        copy = cloudpickle.loads(cloudpickle.dumps(sink))
        if killed:
            copy.__dict__["abort"] = _never_aborted
        return OneInputHarness(
            self.job.sink_operator(copy, name=uid),
            parallelism=self.job.parallelism,
            subtask_index=subtask,
            epoch=checkpoint_id,
            storage=self.job.storage,
            task_name=uid,
            job_name=self.job.name,
            run_id=self.run_id,
            job_id=self.job_id,
            attempt_id=next(self.job.attempts),
        )

    # ---- the driver ----

    def complete(self, epoch: Epoch) -> CompletedCheckpoint:
        """The coordinator completes the epoch's checkpoint (its metadata written)."""
        return self.coordinator.complete(
            epoch.checkpoint_id,
            self.run_id,
            epoch.final,
            epoch.acknowledgements,
            epoch.expected,
            {"sources": {SOURCE: {"next": epoch.position}}},
        )

    def commit(self, checkpoint: CompletedCheckpoint) -> None:
        """The driver's commit of a completed checkpoint, as after every epoch: every
        pending one up to it in order, then cleanup of what it does not reference."""
        self.coordinator.commit(checkpoint, self.sinks)
        self.abort_uncommitted(checkpoint.committables)
        self.finished = self.finished or checkpoint.final

    def checkpoint(self, count: int, end: EpochEnd = "checkpoint") -> CompletedCheckpoint:
        """One whole epoch: written, completed and committed."""
        checkpoint = self.complete(self.epoch(count, end))
        self.commit(checkpoint)
        return checkpoint

    def commit_and_crash(self, checkpoint: CompletedCheckpoint, uids: Sequence[str]) -> None:
        """The driver commits ``checkpoint`` to the sinks ``uids`` (commit, post_commit, in
        the coordinator's order) and dies before the other sinks and the commit record."""
        context = self.coordinator.commit_context(self.run_id, checkpoint.checkpoint_id)
        for uid in sorted(uids):
            committables = checkpoint.committables.get(uid, [])
            self.sinks[uid].commit(context.for_sink(uid), committables)
            self.sinks[uid].post_commit(context.for_sink(uid), committables)

    def abort_uncommitted(self, keep: dict[str, list[Any]]) -> None:
        """Every sink drops what this job left that ``keep`` does not reference."""
        context = self.coordinator.commit_context(self.run_id, 0)
        for uid, sink in self.sinks.items():
            sink.abort_uncommitted(context.for_sink(uid), keep.get(uid, []))


def _end_epoch(task: OneInputHarness, checkpoint_id: int, end: EpochEnd) -> TaskAcknowledgement:
    if end == "checkpoint":
        task.checkpoint(checkpoint_id)
    elif end == "savepoint":
        task.checkpoint(checkpoint_id, kind="savepoint")
    else:
        task.complete(checkpoint_id, kind="savepoint" if end == "drain" else "checkpoint")
    acknowledgement = task.acknowledgement
    assert acknowledgement is not None  # the harness raised if the task took no snapshot
    return acknowledgement


def _never_aborted(transaction: object) -> None:
    """A killed worker's abort: it never runs (the process is gone)."""
