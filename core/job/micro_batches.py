"""A job over a streaming DataFrame: Spark's micro-batches drive the epochs.

The streaming query (``writeStream.foreachBatch``, its offsets in the job's folder) calls
``on_batch`` for every micro-batch; each one runs as one epoch ending in checkpoint
``base + batch_id + 1`` (``streaming_source`` says why that keeps both logs in step).
A savepoint or stop requested while a micro-batch runs is taken at its end (its
checkpoint becomes the savepoint), as the epoch loop does; one that arrives between
micro-batches is taken by the next.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint.restore import plan_restores
from flintlock.core.checkpoint.savepoints import as_planned
from flintlock.core.errors import CheckpointError, FlintlockError, JobControlError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.job import run_end, run_start
from flintlock.core.job.control import ControlRequest
from flintlock.core.plan.graph import build_job_graph
from flintlock.core.sources.epochs import EpochSplits
from flintlock.core.spark.failures import python_cause

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
    from flintlock.core.job.result import JobExecutionResult
    from flintlock.core.job.run import JobRun
    from flintlock.core.plan.execution import ExecutionPlan


class MicroBatchEpochs:
    """Runs one job run as a streaming query whose micro-batches are epochs."""

    def __init__(self, run: JobRun) -> None:
        self.run = run
        self.source = run.streaming
        self.uid = run.uids[self.source.name]
        self.stop_now = threading.Event()
        self.failure: BaseException | None = None
        self.ending: tuple[CompletedCheckpoint, str] | None = None

    def run_epochs(
        self, latest: CompletedCheckpoint | None, started: float, new_run: bool
    ) -> JobExecutionResult:
        """Start the streaming query and wait for it: stopped, ended, or failed."""
        run = self.run
        if not isinstance(run.storage.filesystem, pafs.LocalFileSystem):
            raise CheckpointError(
                "a streaming DataFrame source keeps Spark's offsets in the job's folder, "
                "which must be on the local file system for now"
            )
        start = run_start.starting_point(run, latest, new_run)
        stream = start.source_states.get(self.uid) or {}
        self.offsets = stream.get("offsets") or f"{run.folder.path}/spark-offsets-{run.run_id}"
        self.base = int(stream["base"]) if "base" in stream else start.checkpoint_id - 1
        restore = start.restore
        self.restores = plan_restores(restore, run.graph) if restore is not None else {}
        self.checkpoint = latest
        run.folder.record_running(run.run_id)
        run.control.expire_requests(run.run_id)
        run.epoch_end_savepoint = run.savepoint_at_epoch_end
        try:
            query, query_error = self._await(self._writer().start())
        finally:
            run.epoch_end_savepoint = as_planned
        if self.failure is not None:  # an epoch's own (flintlock) error, raised in on_batch
            run_end.failed(run.master, run.run_id, self.failure)  # type: ignore[arg-type]
            if isinstance(self.failure, FlintlockError):
                # its traceback went through Spark's callback server (py4j): the message
                # names everything, the frames add only Spark's
                raise self.failure.with_traceback(None) from None
            raise self.failure
        failed = query_error is not None or query.exception() is not None
        if failed and self.ending is None:  # after a stop, only a batch begun late failed
            error = JobControlError(query_failure(query_error or query.exception()))
            run_end.failed(run.master, run.run_id, error)
            raise error
        if self.ending is not None:  # a stop request took its savepoint
            checkpoint, savepoint = self.ending
            # a drain ended the input: FINISHED (run_end.ended)
            return run_end.ended(run, checkpoint, started, savepoint, checkpoint.final)
        return run_end.stopped(run, self.checkpoint, started, None)

    def _await(self, query: Any) -> tuple[Any, Exception | None]:
        """Wait until the query ends or a stop took its savepoint; the query and the
        error it failed with (Spark's StreamingQueryException), if any."""
        try:
            while query.isActive and not self.stop_now.is_set():
                query.awaitTermination(0.1)
        except Exception as error:
            return query, error
        finally:
            if query.isActive:
                query.stop()
        return query, None

    def _writer(self) -> Any:
        """The query's writer: foreachBatch, the offsets folder, the trigger."""
        frame: DataFrame = self.source.spark_source
        writer = frame.writeStream.foreachBatch(self.on_batch)
        writer = writer.option("checkpointLocation", self.offsets)
        trigger = self.run.trigger
        if trigger.kind == "available_now":
            return writer.trigger(availableNow=True)
        if trigger.kind == "once":
            return writer.trigger(once=True)
        if trigger.interval_seconds:
            return writer.trigger(processingTime=f"{trigger.interval_seconds} seconds")
        return writer

    def on_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch: one epoch, unless its checkpoint completed before a crash.

        Spark may begin the next micro-batch before the query stops after a stop's
        savepoint: it fails unrun, so that Spark's commit log lacks it and the next start
        runs it (returning would log it done, its rows never read)."""
        if self.ending is not None:
            raise JobControlError(f"micro-batch {batch_id} began after the stop's savepoint")
        try:
            self._epoch(batch, batch_id)
        except BaseException as error:
            self.failure = error
            raise

    def _epoch(self, batch: DataFrame, batch_id: int) -> None:
        run = self.run
        epoch_started = time.monotonic()
        checkpoint_id = self.base + batch_id + 1
        latest = run.coordinator.latest()
        if latest is not None and latest.checkpoint_id >= checkpoint_id:
            if latest.checkpoint_id != checkpoint_id:
                raise CheckpointError(
                    f"Spark replays micro-batch {batch_id} (checkpoint {checkpoint_id}) but "
                    f"the job's checkpoints reach {latest.checkpoint_id}: its offsets folder "
                    f"{self.offsets} does not belong to these checkpoints"
                )
            run.coordinator.commit(latest, run.sinks)  # done before a crash
            self.checkpoint, self.restores = latest, run.restores_after(latest)
            return
        request = run.next_request()
        drain = request is not None and request.action == "stop" and request.drain
        parallelism = self.source.parallelism
        frame = batch.repartition(parallelism)
        run.graph = build_job_graph(
            [
                dataclasses.replace(t, spark_source=frame) if t.name == self.source.name else t
                for t in run.graph_transformations
            ]
        )
        state = {"offsets": self.offsets, "base": self.base, "batch_id": batch_id}
        planned = {self.uid: EpochSplits([[] for _ in range(parallelism)], state)}
        run.request_at_epoch_end = None
        try:
            plan, checkpoint = self._run(checkpoint_id, planned, request, drain)
            if request is None and run.request_at_epoch_end is not None:
                request = run.request_at_epoch_end  # its savepoint is this checkpoint
        except Exception as error:
            if request is None:
                raise
            # a savepoint that failed before it completed fails the request (a stop too),
            # not the job: the micro-batch runs again as a plain checkpoint (new attempts,
            # new file names). A commit that fails after it completed fails the job.
            run.control.answer(request, error=f"{type(error).__name__}: {error}")
            request, drain = None, False
            plan, checkpoint = self._run(checkpoint_id, planned, None, False)
        run.commit_epoch(checkpoint)
        run_end.record_epoch(run, plan, checkpoint, epoch_started)
        self.checkpoint, self.restores = checkpoint, run.restores_after(checkpoint)
        if request is not None:
            savepoint = run.savepoint_uri(checkpoint)
            run.control.answer(request, savepoint=savepoint, checkpoint_id=checkpoint_id)
            if request.action == "stop":
                self.ending = (checkpoint, savepoint)
                self.stop_now.set()

    def _run(
        self,
        checkpoint_id: int,
        planned: dict[str, EpochSplits],
        request: ControlRequest | None,
        drain: bool,
    ) -> tuple[ExecutionPlan, CompletedCheckpoint]:
        """The micro-batch's epoch up to its checkpoint: a savepoint if a request asks."""
        run = self.run
        kind = "savepoint" if request is not None else "checkpoint"
        barrier = CheckpointBarrier(checkpoint_id, kind, final=drain)
        root = run.savepoint_root(checkpoint_id) if request is not None else None
        plan = run.plan(barrier, self.restores, [], planned, drain, root)
        return plan, run.run_epoch(plan, planned)


def query_failure(error: Any) -> str:
    """A failed streaming query, its Python cause first (Spark's text follows it)."""
    text = str(error)
    cause = python_cause(text)
    first = text.strip().splitlines()[0][:300] if text.strip() else type(error).__name__
    return (
        f"{cause}: the streaming query failed ({first})"
        if cause
        else (f"the streaming query failed: {first}")
    )
