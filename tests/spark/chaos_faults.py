"""Faults for the chaos test: user functions and sinks that fail, kill their Python
worker or kill the driver, each exactly once.

"Once" is a marker file: the first call that reaches a fault creates
``<markers>/<fault id>`` with O_EXCL (so of two racing subtasks only one fires) and then
fails; every later attempt, retry or restart finds the marker and carries on. The test
counts the markers to know which faults really happened.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from flintlock.core.api.functions import KeyedProcessFunction, MapFunction
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.files import FileSink

FUNCTION_FAULTS = ("raise", "worker_kill")
"""In a per-record function (``where`` = ``map`` or ``process``), in a Spark task."""
WRITER_FAULTS = ("write", "finish", "pre_commit")
"""Sink writer methods that raise once, in a Spark task (retried under ``local[2,4]``)."""
DRIVER_KILLS = ("kill_in_commit", "kill_mid_commit", "kill_in_post_commit", "kill_after_execute")
"""Deterministic driver kills: between checkpoint completion and commit, after the first
file of the commit, right after the final commit, after ``execute()`` returned."""


@dataclass(frozen=True)
class Fault:
    """One planned fault: its id (the marker's name), where, what, and the call it fires at."""

    id: str
    where: str
    """``map``, ``process``, ``files`` or ``collect`` (a sink), or ``driver``."""
    kind: str
    at: int = 1
    """The n-th call (record for functions, batch for ``write``) of a task attempt."""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "where": self.where, "kind": self.kind, "at": self.at}

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Fault:
        return cls(document["id"], document["where"], document["kind"], document["at"])


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
    if fault.kind in DRIVER_KILLS:
        kill_driver()
    raise InjectedFault(f"injected {fault.kind} ({fault.id})")


class FaultyMap(MapFunction):
    """Identity map per record; its faults fire at the n-th record of a task attempt."""

    def __init__(self, markers: str, faults: list[Fault]) -> None:
        self.markers = markers
        self.faults = faults
        self.seen = 0

    def map(self, value: dict[str, Any]) -> dict[str, Any]:
        self.seen += 1
        for fault in self.faults:
            if fault.at == self.seen:
                fire(self.markers, fault)
        return value


class FaultyKeyedProcess(KeyedProcessFunction):
    """Forwards every record of a keyed stream; its faults fire at the n-th record."""

    def __init__(self, markers: str, faults: list[Fault]) -> None:
        self.markers = markers
        self.faults = faults
        self.seen = 0

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.seen += 1
        for fault in self.faults:
            if fault.at == self.seen:
                fire(self.markers, fault)
        out.collect(value)


class FaultsOfSink:
    """The fault points of a sink: writer methods (tasks) and committer methods (driver)."""

    markers: str
    faults: list[Fault]
    writes: int

    def _plan(self, markers: str, faults: list[Fault]) -> None:
        """Where this sink's faults fire, and where their markers go."""
        self.markers = markers
        self.faults = faults
        self.writes = 0

    def _fire(self, kind: str, count: int = 1) -> None:
        for fault in self.faults:
            if fault.kind == kind and fault.at == count:
                fire(self.markers, fault)

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
        self._fire("kill_in_post_commit")


class FaultyFileSink(FaultsOfSink, FileSink):
    """A FileSink whose writer and committer fail once where the plan says."""

    def __init__(self, path: str, markers: str, faults: list[Fault], **options: Any) -> None:
        super().__init__(path, **options)
        self._plan(markers, faults)

    def commit(self, context: Any, committables: list[Any]) -> None:
        self._fire("kill_in_commit")
        self._fire("commit")
        self.moved = 0
        super().commit(context, committables)

    def commit_file(self, filesystem: Any, file: dict[str, str]) -> None:
        super().commit_file(filesystem, file)
        self.moved += 1
        self._fire("kill_mid_commit", self.moved)


class FaultyCollectSink(FaultsOfSink, CollectSink):
    """A CollectSink whose writer and committer fail once where the plan says."""

    def __init__(self, name: str, markers: str, faults: list[Fault]) -> None:
        super().__init__(name)
        self._plan(markers, faults)

    def commit(self, context: Any, committables: list[Any]) -> None:
        self._fire("kill_in_commit")
        self._fire("commit")
        super().commit(context, committables)
