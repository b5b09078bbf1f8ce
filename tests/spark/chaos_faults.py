"""Faults for the chaos tests: user functions and sinks that fail, kill their Python
worker or kill the driver, each exactly once.

"Once" is a marker file: the first call that reaches a fault creates
``<markers>/<fault id>`` with O_EXCL (so of two racing subtasks only one fires) and then
fails; every later attempt, retry or restart finds the marker and carries on. The test
counts the markers to know which faults really happened.

In an unbounded job (tests/spark/test_chaos_unbounded.py) a fault also names the first
epoch it may fire in (``Fault.epoch``, a checkpoint id; 0: any), so that it lands at a
random epoch: a function's fault fires at the n-th record of a task attempt of that
epoch or a later one, a sink's at its first call there.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from flintlock.core.api.functions import KeyedProcessFunction, MapFunction
from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.files import FileSink

FUNCTION_FAULTS = ("raise", "worker_kill")
"""In a per-record function (``where`` = ``map`` or ``process``), in a Spark task."""
WRITER_FAULTS = ("write", "finish", "pre_commit")
"""Sink writer methods that raise once, in a Spark task (retried under ``local[2,4]``)."""
DRIVER_KILLS = (
    "kill_in_commit",
    "kill_mid_commit",
    "kill_after_commit",
    "kill_in_post_commit",
    "kill_after_execute",
)
"""Deterministic driver kills: between checkpoint completion and commit, after the first
file of the commit, after the sink's commit before it is recorded, right after the
post-commit, after ``execute()`` returned."""
EPOCH_DRIVER_KILLS = (
    "kill_between_epochs",
    "kill_in_savepoint_commit",
    "kill_mid_savepoint_commit",
    "kill_mid_epoch",
    "kill_in_transaction",
)
"""Driver kills of unbounded jobs only: after an epoch's commit (before the next epoch
starts), in the commit of a savepoint (a stop's or a savepoint request's) before any
file or after its first file was published, from a task at a record of a function (its
epoch's Spark job under way: the worker kills its driver's process group), and inside a
KafkaSink's transaction, every row at the broker, before ``commit_transaction``."""


@dataclass(frozen=True)
class Fault:
    """One planned fault: its id (the marker's name), where, what, and the call it fires at."""

    id: str
    where: str
    """``map``, ``process``, ``files`` or ``collect`` (a sink), or ``driver``."""
    kind: str
    at: int = 1
    """The n-th call (record for functions, batch for ``write``) of a task attempt (of
    the transaction, for a sink in an unbounded job)."""
    epoch: int = 0
    """Unbounded jobs: the first epoch (checkpoint id) the fault may fire in; 0: any."""

    def to_json(self) -> dict[str, Any]:
        document = {"id": self.id, "where": self.where, "kind": self.kind, "at": self.at}
        return document | ({"epoch": self.epoch} if self.epoch else {})

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Fault:
        return cls(
            document["id"],
            document["where"],
            document["kind"],
            document["at"],
            document.get("epoch", 0),
        )

    def due(self, kind: str, count: int, epoch: int) -> bool:
        """Whether the ``count``-th call of ``kind`` in ``epoch`` reaches this fault."""
        return self.kind == kind and self.at == count and epoch >= self.epoch


class InjectedFault(RuntimeError):
    """The error an injected fault raises (never a flintlock error: it is the user's)."""


def claim(markers: str, fault: Fault) -> bool:
    """True exactly once per fault across processes: the caller that created the marker."""
    try:
        descriptor = os.open(os.path.join(markers, fault.id), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(descriptor, f"{fault.kind} pid={os.getpid()}\n".encode())
    os.fsync(descriptor)
    os.close(descriptor)
    return True


def kill_driver() -> None:
    """SIGKILL the driver's whole process group (the driver, its JVM and Python workers)."""
    os.killpg(os.getpgrp(), signal.SIGKILL)


def fire(markers: str, fault: Fault) -> None:
    """Fire ``fault`` if it has not fired yet: raise, kill this worker or the driver."""
    if not claim(markers, fault):
        return
    if fault.kind == "worker_kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault.kind in DRIVER_KILLS or fault.kind in EPOCH_DRIVER_KILLS:
        kill_driver()
    raise InjectedFault(f"injected {fault.kind} ({fault.id})")


class FaultsOfFunction:
    """The fault points of a per-record function: the n-th record of a task attempt."""

    markers: str
    faults: list[Fault]
    seen: int
    runtime_context: Any

    def _plan(self, markers: str, faults: list[Fault]) -> None:
        """Where this function's faults fire, and where their markers go."""
        self.markers = markers
        self.faults = faults
        self.seen = 0

    def _record(self) -> None:
        """Count one record; fire the faults due at it (in this epoch or an earlier one)."""
        self.seen += 1
        for fault in self.faults:
            epoch = self.runtime_context.task_info.epoch if fault.epoch else 0
            if fault.due(fault.kind, self.seen, epoch):
                fire(self.markers, fault)


class FaultyMap(FaultsOfFunction, MapFunction):
    """Identity map per record; its faults fire at the n-th record of a task attempt."""

    def __init__(self, markers: str, faults: list[Fault]) -> None:
        self._plan(markers, faults)

    def map(self, value: dict[str, Any]) -> dict[str, Any]:
        self._record()
        return value


class FaultyKeyedProcess(FaultsOfFunction, KeyedProcessFunction):
    """Forwards every record of a keyed stream; its faults fire at the n-th record."""

    def __init__(self, markers: str, faults: list[Fault]) -> None:
        self._plan(markers, faults)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self._record()
        out.collect(value)


class FaultsOfSink:
    """The fault points of a sink: writer methods (tasks) and committer methods (driver)."""

    markers: str
    faults: list[Fault]
    writes: int
    epoch: int

    def _plan(self, markers: str, faults: list[Fault]) -> None:
        """Where this sink's faults fire, and where their markers go."""
        self.markers = markers
        self.faults = faults
        self.writes = 0
        self.epoch = 0

    def _fire(self, kind: str, count: int = 1, epoch: int | None = None) -> None:
        """Fire the faults of ``kind`` due at its ``count``-th call in ``epoch`` (default:
        the epoch of the writer's transaction)."""
        for fault in self.faults:
            if fault.due(kind, count, self.epoch if epoch is None else epoch):
                fire(self.markers, fault)

    def begin_transaction(self, context: Any, checkpoint_id: int) -> Any:
        self.epoch = checkpoint_id
        self.writes = 0
        return super().begin_transaction(context, checkpoint_id)  # type: ignore[misc]

    def write(self, transaction: Any, batch: Any) -> None:
        self.writes += 1
        self._fire("write", self.writes)
        super().write(transaction, batch)  # type: ignore[misc]

    def finish(self, transaction: Any) -> None:
        super().finish(transaction)  # type: ignore[misc]
        self._fire("finish")

    def pre_commit(self, transaction: Any) -> list[Any]:
        committables = super().pre_commit(transaction)  # type: ignore[misc]
        self._fire("pre_commit")
        return committables

    def post_commit(self, context: Any, *args: Any, **kwargs: Any) -> None:
        super().post_commit(context, *args, **kwargs)  # type: ignore[misc]
        self._fire("kill_in_post_commit", epoch=context.checkpoint_id)
        self._fire("post_commit", epoch=context.checkpoint_id)


class FaultyFileSink(FaultsOfSink, FileSink):
    """A FileSink whose writer and committer fail once where the plan says: its commit
    raises before any file (``commit``) or after the first of several (``mid_commit``)."""

    def __init__(self, path: str, markers: str, faults: list[Fault], **options: Any) -> None:
        super().__init__(path, **options)
        self._plan(markers, faults)

    def commit(self, context: Any, committables: list[Any]) -> None:
        epoch = context.checkpoint_id
        self._fire("kill_in_commit", epoch=epoch)
        self._fire("commit", epoch=epoch)
        self.savepoint = self._is_savepoint(context)
        if self.savepoint:
            self._fire("kill_in_savepoint_commit", epoch=epoch)
        self.moved, self.moving, self.committing = 0, len(committables), epoch
        super().commit(context, committables)

    def commit_file(self, filesystem: Any, file: dict[str, str]) -> None:
        super().commit_file(filesystem, file)
        self.moved += 1
        if self.moved < self.moving:  # more files follow: the commit is half done
            self._fire("kill_mid_commit", self.moved, self.committing)
            self._fire("mid_commit", self.moved, self.committing)
            if self.savepoint:
                self._fire("kill_mid_savepoint_commit", self.moved, self.committing)

    def _is_savepoint(self, context: Any) -> bool:
        """Whether the checkpoint being committed is a savepoint (its metadata's kind);
        read only while a savepoint fault of this sink waits to fire."""
        kinds = ("kill_in_savepoint_commit", "kill_mid_savepoint_commit")
        if not any(fault.kind in kinds for fault in self.faults):
            return False
        path = f"{context.job_dir}/checkpoints/chk-{context.checkpoint_id}/_metadata.json"
        storage = context.storage
        return bool(storage.exists(path) and storage.read_json(path).get("kind") == "savepoint")


class FaultyCollectSink(FaultsOfSink, CollectSink):
    """A CollectSink whose writer and committer fail once where the plan says."""

    def __init__(self, name: str, markers: str, faults: list[Fault]) -> None:
        super().__init__(name)
        self._plan(markers, faults)

    def commit(self, context: Any, committables: list[Any]) -> None:
        self._fire("kill_in_commit")
        self._fire("commit")
        super().commit(context, committables)


class DelegatingSink(TwoPhaseCommitSink):
    """Any 2PC sink behind a wrapper that forwards every call to it, under its name (the
    sink's uid in the job graph stays the same): the base of sinks that add faults."""

    def __init__(self, inner: TwoPhaseCommitSink) -> None:
        self.inner = inner
        self.name = inner.name
        self.commits_beside_next_epoch = inner.commits_beside_next_epoch  # as the inner's

    def __getattr__(self, attribute: str) -> Any:
        """Other attributes (a collect sink's ``result``) are the inner sink's."""
        if attribute.startswith("__") or attribute == "inner":
            raise AttributeError(attribute)  # unpickling: no ``inner`` yet
        return getattr(self.inner, attribute)

    def begin_transaction(self, context: Any, checkpoint_id: int) -> Any:
        return self.inner.begin_transaction(context, checkpoint_id)

    def write(self, transaction: Any, batch: Any) -> None:
        self.inner.write(transaction, batch)

    def finish(self, transaction: Any) -> None:
        self.inner.finish(transaction)

    def pre_commit(self, transaction: Any) -> list[Any]:
        return self.inner.pre_commit(transaction)

    def abort(self, transaction: Any) -> None:
        self.inner.abort(transaction)

    def check_output(self, context: Any) -> None:
        self.inner.check_output(context)

    def prepare_output(self, context: Any) -> None:
        self.inner.prepare_output(context)

    def commit(self, context: Any, committables: list[Any]) -> None:
        self.inner.commit(context, committables)

    def post_commit(self, context: Any, committables: list[Any]) -> None:
        self.inner.post_commit(context, committables)

    def abort_uncommitted(self, context: Any, keep: list[Any]) -> None:
        self.inner.abort_uncommitted(context, keep)


class FaultySink(FaultsOfSink, DelegatingSink):
    """Any 2PC sink failing once where the plan says: its writer in write / finish /
    pre_commit; its commit before the inner commit (``commit``, ``kill_in_commit``) or
    after it, before it is recorded (``after_commit``, ``kill_after_commit``); its
    post-commit after the inner one (``post_commit``, ``kill_in_post_commit``)."""

    def __init__(self, inner: TwoPhaseCommitSink, markers: str, faults: list[Fault]) -> None:
        super().__init__(inner)
        self._plan(markers, faults)

    def commit(self, context: Any, committables: list[Any]) -> None:
        epoch = context.checkpoint_id
        self._fire("kill_in_commit", epoch=epoch)
        self._fire("commit", epoch=epoch)
        super().commit(context, committables)
        self._fire("kill_after_commit", epoch=epoch)
        self._fire("after_commit", epoch=epoch)
