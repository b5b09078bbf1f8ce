"""Two-phase-commit sinks: write in a transaction per checkpoint, pre-commit in the
snapshot, commit on the driver once the checkpoint completed (exactly once, FLIP-147).

A Spark task cannot wait for the driver to say that a checkpoint completed, so the
committer runs on the driver; committables travel in the acknowledgements and the
checkpoint metadata as JSON values, never pickled, and a restarted driver commits the last
completed checkpoint's again from its metadata (hence commits are idempotent)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import ClassVar, Generic, TypeVar

import pyarrow as pa

from flintlock.core.checkpoint.storage import CheckpointStorage, safe_name
from flintlock.core.storage.options import NO_OPTIONS, StorageOptions
from flintlock.core.task_info import TaskInfo

OUTPUT_MODES = ("error", "append", "overwrite")
"""What a new run may do to output that already holds data (as Spark's save modes)."""

TxnT = TypeVar("TxnT")
"""A sink's transaction: what its writer keeps for one checkpoint (never serialised)."""
CommT = TypeVar("CommT")
"""A sink's committable: a JSON value (a TypedDict, a str), recorded in the task's
acknowledgement and the checkpoint metadata as it is, and handed back to the committer."""


@dataclass(frozen=True)
class SinkWriterContext:
    """Where a sink's writer runs: the subtask, its attempt, and the checkpoint storage."""

    task: TaskInfo
    storage: CheckpointStorage
    sink_uid: str = ""
    """The sink's name in the job graph, as ``CommitContext.sink_uid``."""


@dataclass(frozen=True)
class OutputCheckContext:
    """What a sink's ``check_output`` is told before Spark starts: the job and the sink's
    name in its graph (no checkpoint storage, no run: the job's folder is not read yet)."""

    job_name: str
    sink_uid: str


@dataclass(frozen=True)
class CommitContext:
    """Where a sink's committer runs: on the driver, for one checkpoint of one job run.

    ``job_id`` is made at the job's first start and stays for every run of the job
    (checkpoint directory, job name); ``run_id`` is new for every run."""

    job_name: str
    run_id: str
    checkpoint_id: int
    storage: CheckpointStorage
    job_id: str = ""
    sink_uid: str = ""
    """The sink's name in the job graph (unique in the job, stable across runs): with
    ``job_id`` it names the sink's transactions in the system it writes to."""

    def for_sink(self, uid: str) -> CommitContext:
        """This context, told which sink of the job it is for."""
        return replace(self, sink_uid=uid)

    @property
    def job_dir(self) -> str:
        """The job's folder in checkpoint storage (sinks may keep their results there)."""
        return self.storage.job_dir(self.job_name)

    def sink_notes(self, kind: str) -> str:
        """The JSON file in the job's folder where this sink's committer keeps notes that
        outlive a run (e.g. from which checkpoint an overwrite is due): one per sink uid."""
        return f"{self.job_dir}/sinks/{kind}-{safe_name(self.sink_uid or 'sink')}.json"


class TwoPhaseCommitSink(ABC, Generic[TxnT, CommT]):
    """A sink whose writes become visible only when their checkpoint completes.

    Generic over its transaction type and its committable type, e.g.
    ``FileSink(TwoPhaseCommitSink[_Transaction, StagedParquetFile])``; committables are
    JSON values (a TypedDict says which keys), never pickled.

    Writer side (in tasks): ``begin_transaction``, ``write``, ``finish`` (flush the last
    data), ``pre_commit`` -> JSON committables, ``abort``. Committer side (on the driver),
    in this order at a start:

    1. ``check_output`` — before the Spark session starts (or, with a session given,
       before any Spark job): what the sink's configuration and ``input_schema`` alone
       can check (the output reachable, its schema fits the stream, server settings);
    2. the job's lease is taken and its folder read; then, for a new run only,
       ``prepare_output`` — what needs the job's folder (the output mode against the
       output's data, notes in checkpoint storage);
    3. ``abort_uncommitted`` at every start (after the commit of a pending checkpoint)
       cleans what failed or killed attempts left;
    4. as checkpoints complete, ``commit`` — idempotent, once per completed checkpoint
       with every subtask's committables, in checkpoint order — then ``post_commit``.

    A check made in step 1 need not be made again in step 2 (the writers still refuse
    rows that do not fit, which is all a job run without step 1 relies on).
    """

    name = "2pc-sink"

    input_schema: pa.Schema | None = None
    """The Arrow schema of the stream the sink writes, if known on the driver (set by
    ``DataStream.sink_to``): a sink may create its output from it, or refuse in
    ``check_output`` a stream its output cannot take, before Spark starts."""

    commits_beside_next_epoch: ClassVar[bool] = False
    """True if ``commit`` may run on the driver while the next epoch's tasks write (it
    touches nothing they write): the next epoch then starts as soon as the checkpoint is
    published, and the commit runs beside it, as Flink commits on
    ``notifyCheckpointComplete``. ``abort_uncommitted`` (given every committable of the
    checkpoint to keep) then runs before the commit, never while tasks write."""

    job_storage_options: StorageOptions = NO_OPTIONS
    """The environment's ``storage_options`` (set by ``DataStream.sink_to``): a sink on
    an object store opens it with them (options of its own win, key by key)."""

    # ---- writer side (tasks) ----

    @abstractmethod
    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> TxnT:
        """Start the transaction that checkpoint ``checkpoint_id`` will commit."""

    @abstractmethod
    def write(self, transaction: TxnT, batch: pa.RecordBatch) -> None:
        """Write a batch into the transaction (invisible to readers until commit)."""

    def finish(self, transaction: TxnT) -> None:
        """Flush buffered rows: the input ended, no more writes follow (FLIP-147)."""

    @abstractmethod
    def pre_commit(self, transaction: TxnT) -> list[CommT]:
        """Make the transaction durable; returns its JSON committables.

        Committables should carry what the committer needs to verify them (e.g. each
        staged file's size and row count), so a damaged file is refused, not published."""

    @abstractmethod
    def abort(self, transaction: TxnT) -> None:
        """Drop a transaction that will never be committed (failure or cancel); called
        before or after ``pre_commit``."""

    # ---- committer side (driver) ----

    def check_output(self, context: OutputCheckContext) -> None:
        """Before Spark starts, on the driver: refuse (SinkOutputError, naming the sink,
        the output and what does not fit) what the sink's own configuration and
        ``input_schema`` show cannot work — an unreachable server, a table whose columns
        do not fit the stream, a missing server setting. Called once per start, before the
        job's folder is read; not when a start returns a finished run's stored result."""

    def prepare_output(self, context: CommitContext) -> None:
        """Before a new run of the job writes anything, under the job's lease: check that
        the output may take it (the sink's output mode against the data it holds); raise
        SinkOutputError to refuse. Not called when a start only completes a pending
        commit or returns a finished run's result."""

    @abstractmethod
    def commit(self, context: CommitContext, committables: list[CommT]) -> None:
        """Make the committables of a completed checkpoint visible. Must be idempotent:
        after a crash it runs again with the same committables, some already committed."""

    def post_commit(self, context: CommitContext, committables: list[CommT]) -> None:
        """A global step after the commit of every checkpoint, the final one included,
        with the committables just committed. Must be idempotent, like ``commit``: a
        driver that dies after it ran calls it again for the same checkpoint."""

    def abort_uncommitted(self, context: CommitContext, keep: list[CommT]) -> None:
        """At a job start: remove what this job left that no completed checkpoint
        references (``keep``) — never another job's files."""
