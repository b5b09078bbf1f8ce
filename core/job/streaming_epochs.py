"""A job over a streaming DataFrame: Spark's micro-batches drive the epochs.

The streaming query (``writeStream.foreachBatch``, its offsets in the job's folder) calls
``on_batch`` for every micro-batch; each one runs as one epoch ending in checkpoint
``base + batch_id + 1`` (``streaming_source`` says why that keeps both logs in step).
Savepoint and stop requests are taken at the start of a micro-batch.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint.restore import plan_restores
from flintlock.core.errors import CheckpointError, FlintlockError, JobControlError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.job.control import ControlRequest
from flintlock.core.plan.graph import build_job_graph
from flintlock.core.sources.epochs import EpochSplits
from flintlock.core.spark.failures import python_cause

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
    from flintlock.core.job.epoch_run import EpochRun
    from flintlock.core.job.result import JobExecutionResult
    from flintlock.core.plan.execution import ExecutionPlan


class StreamingEpochs:
    """Runs one job run as a streaming query whose micro-batches are epochs."""

    def __init__(self, loop: EpochRun) -> None:
        self.loop = loop
        self.master = loop.master
        self.source = loop.streaming
        self.uid = loop.uids[self.source.name]
        self.stop_now = threading.Event()
        self.failure: BaseException | None = None
        self.ending: tuple[CompletedCheckpoint, str] | None = None

    def run(
        self, latest: CompletedCheckpoint | None, started: float, new_run: bool
    ) -> JobExecutionResult:
        """Start the streaming query and wait for it: stopped, ended, or failed."""
        loop, master = self.loop, self.master
        if not isinstance(master.storage.filesystem, pafs.LocalFileSystem):
            raise CheckpointError(
                "a streaming DataFrame source keeps Spark's offsets in the job's folder, "
                "which must be on the local file system for now"
            )
        self.run_id = master.run_id
        restore, states, first_id = loop.starting_point(latest, new_run, self.run_id)
        stream = states.get(self.uid) or {}
        self.offsets = stream.get("offsets") or f"{master.folder.path}/spark-offsets-{self.run_id}"
        self.base = int(stream["base"]) if "base" in stream else first_id - 1
        self.restores = plan_restores(restore, loop.graph) if restore is not None else {}
        self.checkpoint = latest
        self.started = started
        master.folder.record_running(self.run_id)
        loop.control.expire_requests(self.run_id)
        query = self._writer().start()
        query_error: Exception | None = None
        try:
            while query.isActive and not self.stop_now.is_set():
                query.awaitTermination(0.1)
        except Exception as error:  # Spark's StreamingQueryException: the query failed
            query_error = error
        finally:
            if query.isActive:
                query.stop()
        if self.failure is not None:  # an epoch's own (flintlock) error, raised in on_batch
            master.record_failed(self.run_id, self.failure)  # type: ignore[arg-type]
            if isinstance(self.failure, FlintlockError):
                # its traceback went through Spark's callback server (py4j): the message
                # names everything, the frames add only Spark's
                raise self.failure.with_traceback(None) from None
            raise self.failure
        if query_error is not None or query.exception() is not None:
            error = JobControlError(query_failure(query_error or query.exception()))
            master.record_failed(self.run_id, error)
            raise error
        if self.ending is not None:  # a stop request took its savepoint
            checkpoint, savepoint = self.ending
            if checkpoint.final:  # a drain ended the input: FINISHED (EpochRun.ended)
                return loop.ended(checkpoint, self.run_id, started, savepoint, True)
            return loop.stopped(checkpoint, self.run_id, started, savepoint)
        return loop.stopped(self.checkpoint, self.run_id, started, None)

    def _writer(self) -> Any:
        """The query's writer: foreachBatch, the offsets folder, the trigger."""
        frame: DataFrame = self.source.spark_source
        writer = frame.writeStream.foreachBatch(self.on_batch)
        writer = writer.option("checkpointLocation", self.offsets)
        trigger = self.loop.trigger
        if trigger.kind == "available_now":
            return writer.trigger(availableNow=True)
        if trigger.kind == "once":
            return writer.trigger(once=True)
        if trigger.interval_seconds:
            return writer.trigger(processingTime=f"{trigger.interval_seconds} seconds")
        return writer

    def on_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch: one epoch, unless its checkpoint completed before a crash."""
        try:
            self._epoch(batch, batch_id)
        except BaseException as error:
            self.failure = error
            raise

    def _epoch(self, batch: DataFrame, batch_id: int) -> None:
        loop, master = self.loop, self.master
        epoch_started = time.monotonic()
        checkpoint_id = self.base + batch_id + 1
        latest = master.coordinator.latest()
        if latest is not None and latest.checkpoint_id >= checkpoint_id:
            if latest.checkpoint_id != checkpoint_id:
                raise CheckpointError(
                    f"Spark replays micro-batch {batch_id} (checkpoint {checkpoint_id}) but "
                    f"the job's checkpoints reach {latest.checkpoint_id}: its offsets folder "
                    f"{self.offsets} does not belong to these checkpoints"
                )
            master.coordinator.commit(latest, master.sinks)  # done before a crash
            self.checkpoint, self.restores = latest, loop.restores_after(latest)
            return
        request = loop.next_request(self.run_id)
        drain = request is not None and request.action == "stop" and request.drain
        parallelism = self.source.parallelism
        frame = batch.repartition(parallelism)
        loop.graph = build_job_graph(
            [
                dataclasses.replace(t, spark_source=frame) if t.name == self.source.name else t
                for t in loop.graph_transformations
            ]
        )
        state = {"offsets": self.offsets, "base": self.base, "batch_id": batch_id}
        planned = {self.uid: EpochSplits([[] for _ in range(parallelism)], state)}
        try:
            plan, checkpoint = self._run(checkpoint_id, planned, request, drain)
        except Exception as error:
            if request is None:
                raise
            # a savepoint that failed before it completed fails the request (a stop too),
            # not the job: the micro-batch runs again as a plain checkpoint (new attempts,
            # new file names). A commit that fails after it completed fails the job.
            loop.control.answer(request, error=f"{type(error).__name__}: {error}")
            request, drain = None, False
            plan, checkpoint = self._run(checkpoint_id, planned, None, False)
        loop.commit_epoch(plan, checkpoint, epoch_started)
        self.checkpoint, self.restores = checkpoint, loop.restores_after(checkpoint)
        if request is not None:
            savepoint = checkpoint.savepoint
            loop.control.answer(request, savepoint=savepoint, checkpoint_id=checkpoint_id)
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
        loop = self.loop
        kind = "savepoint" if request is not None else "checkpoint"
        barrier = CheckpointBarrier(checkpoint_id, kind, final=drain)
        root = loop.savepoint_root(checkpoint_id) if request is not None else None
        plan = loop.plan(self.run_id, barrier, self.restores, [], planned, drain, root)
        return plan, loop.checkpoint_epoch(plan, planned)


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
