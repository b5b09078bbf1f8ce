"""Two-phase-commit sinks: write in a transaction per checkpoint, pre-commit in the
snapshot, commit on the driver once the checkpoint completed (exactly once, FLIP-147)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flintlock.core.checkpoint_storage import CheckpointStorage
from flintlock.core.task_info import TaskInfo


@dataclass(frozen=True)
class SinkWriterContext:
    """Where a sink's writer runs: the subtask, its attempt, and the checkpoint storage."""

    task: TaskInfo
    storage: CheckpointStorage


@dataclass(frozen=True)
class CommitContext:
    """Where a sink's committer runs: on the driver, for one completed checkpoint."""

    job_name: str
    run_id: str
    checkpoint_id: int
    storage: CheckpointStorage


class TwoPhaseCommitSink(ABC):
    """A sink whose writes become visible only when their checkpoint completes.

    Writer side (in tasks): ``begin_transaction``, ``write``, ``finish`` (flush the last
    data), ``pre_commit`` -> JSON committables, ``abort``. Committer side (on the driver):
    ``commit`` — idempotent, called once per completed checkpoint with every subtask's
    committables, in checkpoint order — then ``post_commit``; ``abort_uncommitted`` at
    every job start cleans what failed or killed attempts left behind.
    """

    name = "2pc-sink"

    # ---- writer side (tasks) ----

    @abstractmethod
    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> Any:
        """Start the transaction that checkpoint ``checkpoint_id`` will commit."""

    @abstractmethod
    def write(self, transaction: Any, batch: pa.RecordBatch) -> None:
        """Write a batch into the transaction (invisible to readers until commit)."""

    def finish(self, transaction: Any) -> None:  # noqa: B027 - optional
        """Flush buffered rows: the input ended, no more writes follow (FLIP-147)."""

    @abstractmethod
    def pre_commit(self, transaction: Any) -> list[Any]:
        """Make the transaction durable; returns its JSON committables."""

    @abstractmethod
    def abort(self, transaction: Any) -> None:
        """Drop a transaction that will never be committed (failure or cancel)."""

    # ---- committer side (driver) ----

    @abstractmethod
    def commit(self, context: CommitContext, committables: list[Any]) -> None:
        """Make the committables of a completed checkpoint visible. Must be idempotent."""

    def post_commit(self, context: CommitContext) -> None:  # noqa: B027 - optional
        """A global step after the commit of every checkpoint, the final one included."""

    def abort_uncommitted(self, storage: CheckpointStorage, job_name: str, keep: list[Any]) -> None:  # noqa: B027
        """At a job start: remove what no completed checkpoint references (``keep``)."""
