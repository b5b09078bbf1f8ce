"""The schedule of a job over a streaming DataFrame: Spark's micro-batches are the epochs.

The streaming query (``writeStream.foreachBatch``, its offsets in the job's folder)
hands each micro-batch to the run's thread and waits; the run runs it as one epoch
ending in checkpoint ``base + batch_id + 1`` (``streaming_source`` says why that keeps
both logs in step) and commits it, and only then does the callback return, so Spark
logs the batch done after flintlock committed it. A micro-batch Spark begins after the
run ended (a stop's savepoint, a failure) fails unrun: Spark's commit log lacks it and
the next start reads it. Requests are taken as the epoch loop takes them.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from flintlock.core.errors import CheckpointError, JobControlError
from flintlock.core.job.schedules import Epoch, Position
from flintlock.core.plan.graph import build_job_graph
from flintlock.core.sources.epochs import EpochSplits
from flintlock.core.spark.failures import python_cause

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
    from flintlock.core.job.run import JobRun

POLL_SECONDS = 0.1
"""How often the run's thread looks whether the query ended while it waits for a batch."""


@dataclasses.dataclass
class _Batch:
    """A micro-batch handed from Spark's thread, and the run's answer to it."""

    frame: DataFrame
    batch_id: int
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    error: str | None = None
    """Why the callback fails the batch (Spark then does not log it done)."""


class MicroBatchEpochs:
    """The micro-batches of a streaming query, one epoch each."""

    takes_requests = True
    commits_beside_next_epoch = False
    """Spark hands over the next micro-batch only once this one's epoch committed."""

    def __init__(self, run: JobRun) -> None:
        if not isinstance(run.storage.filesystem, pafs.LocalFileSystem):
            raise CheckpointError(
                "a streaming DataFrame source keeps Spark's offsets in the job's folder, "
                "which must be on the local file system for now"
            )
        self.run = run
        self.source = run.streaming
        self.uid = run.uids[self.source.name]
        self.batches: queue.Queue[_Batch] = queue.Queue()
        self.current: _Batch | None = None
        self.retry: Epoch | None = None
        self.closed = False
        self.lock = threading.Lock()
        """Orders a batch handed over against the run's end (no batch waits forever)."""
        self.query: Any = None

    def start(self, position: Position) -> None:
        """Start the query where the job's offsets are (a new folder for a new job)."""
        stream = position.source_states.get(self.uid) or {}
        run = self.run
        self.offsets = stream.get("offsets") or f"{run.folder.path}/spark-offsets-{run.run_id}"
        self.base = int(stream["base"]) if "base" in stream else position.checkpoint_id - 1
        self.query = self._writer().start()

    def next_epoch(self, position: Position) -> Epoch | None:
        """The next micro-batch as an epoch; None once the query ended (its trigger ran
        out); a failed query is a JobControlError."""
        if self.retry is not None:
            epoch, self.retry = self.retry, None
            return epoch
        while True:
            batch = self._next_batch()
            if batch is None:
                return None
            checkpoint_id = self.base + batch.batch_id + 1
            latest = self.run.coordinator.latest()
            if latest is None or latest.checkpoint_id < checkpoint_id:
                return self._epoch(batch, checkpoint_id)
            self._replayed(batch, checkpoint_id, latest)

    def savepoint_failed(self, epoch: Epoch, position: Position) -> None:
        """The micro-batch runs again as a plain checkpoint (new attempts, new file
        names): its id is Spark's batch id, which cannot move on."""
        self.retry = dataclasses.replace(epoch, request=None, source_ends={self.uid: False})

    def epoch_done(self, epoch: Epoch) -> None:
        """The batch's epoch is committed: Spark may log the batch done."""
        self._answer(None)

    def close(self) -> None:
        """Fail the batch in hand and any handed over, and stop the query."""
        why = "the job's run ended before this micro-batch's epoch committed"
        with self.lock:
            self.closed = True
        self._answer(why)
        while not self.batches.empty():
            self.current = self.batches.get_nowait()
            self._answer(why)
        if self.query is not None and self.query.isActive:
            self.query.stop()

    def on_batch(self, frame: DataFrame, batch_id: int) -> None:
        """Spark's thread: hand the batch to the run and wait for its answer."""
        batch = _Batch(frame, batch_id)
        with self.lock:
            if self.closed:
                raise JobControlError(f"micro-batch {batch_id} began after the job's run ended")
            self.batches.put(batch)
        batch.done.wait()
        if batch.error is not None:
            raise JobControlError(f"micro-batch {batch_id} was not committed: {batch.error}")

    def _next_batch(self) -> _Batch | None:
        """The next batch Spark hands over; None once the query ended without error."""
        while True:
            try:
                self.current = self.batches.get(timeout=POLL_SECONDS)
                return self.current
            except queue.Empty:
                pass
            if not self.query.isActive and self.batches.empty():
                error = self.query.exception()
                if error is not None:
                    raise JobControlError(query_failure(error))
                return None

    def _epoch(self, batch: _Batch, checkpoint_id: int) -> Epoch:
        """The batch as an epoch: the run's graph reads it as the stream's rows."""
        run = self.run
        request = run.next_request()
        drain = request is not None and request.action == "stop" and request.drain
        parallelism = self.source.parallelism
        frame = batch.frame.repartition(parallelism)
        run.graph = build_job_graph(
            [
                dataclasses.replace(t, spark_source=frame) if t.name == self.source.name else t
                for t in run.graph_transformations
            ]
        )
        state = {"offsets": self.offsets, "base": self.base, "batch_id": batch.batch_id}
        planned = {self.uid: EpochSplits([[] for _ in range(parallelism)], state)}
        return Epoch(checkpoint_id, planned, {self.uid: drain}, request)

    def _replayed(self, batch: _Batch, checkpoint_id: int, latest: CompletedCheckpoint) -> None:
        """Spark replays the batch whose checkpoint completed before a crash: commit it
        (idempotent; the run's start did) and let Spark log it done."""
        if latest.checkpoint_id != checkpoint_id:
            raise CheckpointError(
                f"Spark replays micro-batch {batch.batch_id} (checkpoint {checkpoint_id}) "
                f"but the job's checkpoints reach {latest.checkpoint_id}: its offsets folder "
                f"{self.offsets} does not belong to these checkpoints"
            )
        self.run.coordinator.commit(latest, self.run.sinks)
        self._answer(None)

    def _answer(self, error: str | None) -> None:
        """Release Spark's thread waiting on the batch in hand (``error``: fail it)."""
        batch, self.current = self.current, None
        if batch is not None:
            batch.error = error
            batch.done.set()

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
