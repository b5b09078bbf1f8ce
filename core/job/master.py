"""The driver's facade of a job (``JobMaster``): its lease, its Spark settings, and what
a start does (a stored result, a pending commit, or a ``JobRun``; ARCHITECTURE.md
sections 1, 5)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator, CompletedCheckpoint
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.restore import RestoreSource
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import JobCanceled
from flintlock.core.job import run_end
from flintlock.core.job import signals as job_signals
from flintlock.core.job.control import JobControl
from flintlock.core.job.lease import DEFAULT_RENEW_SECONDS, JobLease
from flintlock.core.job.micro_batches import MicroBatchEpochs
from flintlock.core.job.result import JobExecutionResult, JobResults
from flintlock.core.job.run import JobRun, Progress
from flintlock.core.job.schedules import Schedule, TriggeredEpochs
from flintlock.core.metrics.recorder import MetricsRecorder
from flintlock.core.plan.graph import Transformation
from flintlock.core.spark.epoch_frames import EpochFrames
from flintlock.core.spark.run_settings import RunSettings, run_settings
from flintlock.core.spark.source_partitions import SourcePartitionCounts
from flintlock.core.storage.options import NO_OPTIONS, StorageOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class JobConfig:
    """How to run a job: its identity, storage, state backend and plugins."""

    job_name: str
    checkpoint_uri: str
    max_parallelism: int = 128
    state_backend: str = "hashmap"
    plugins: list[Any] = field(default_factory=list)
    retained_checkpoints: int = 1
    """Completed checkpoints kept; older ones are deleted once a newer one is committed."""
    restore: RestoreSource | None = None
    """The checked checkpoint a run that starts restores its state from (``restore_from``)."""
    savepoint_dir: str | None = None
    """If set, the run's final snapshot is a savepoint in a new folder under it."""
    lease_seconds: float = DEFAULT_RENEW_SECONDS
    """How often the driver renews its lease on the job (it holds for 5 periods)."""
    metrics: bool = True
    """Take Flink's metrics per epoch (core/metrics/) and keep them in the job's folder."""
    metrics_port: int | None = None
    """Serve the metrics in Prometheus' text format on this port while the job runs."""
    storage_options: StorageOptions = NO_OPTIONS
    """The environment's object-store settings (credentials, endpoint)."""


class JobMaster:
    """The driver's side of a job: holds its lease and Spark settings while a start
    runs, and dispatches it. A start first reads the job's folder: a FINISHED run's
    stored result is returned as it is; a completed final checkpoint whose commit is
    pending is committed; otherwise (or when ``new_run`` is asked for) a ``JobRun``
    runs, its epochs as its sources say (``schedules``, ``micro_batches``)."""

    def __init__(
        self, spark: SparkSession, transformations: list[Transformation], config: JobConfig
    ) -> None:
        self.spark = spark
        self.epoch_frames = EpochFrames(spark)
        self.transformations = transformations
        self.config = config
        self.storage = CheckpointStorage.from_uri(config.checkpoint_uri, config.storage_options)
        self.folder = JobFolder(self.storage, config.job_name)
        self.coordinator = CheckpointCoordinator(self.folder)
        self.sinks: dict[str, TwoPhaseCommitSink[Any, Any]] = {
            t.name: t.sink for t in transformations if t.sink is not None
        }
        self.results = JobResults(config.job_name, self.storage, self.folder, self.sinks)

    def execute(
        self,
        new_run: bool = False,
        trigger: EpochTrigger | None = None,
        progress: Progress | None = None,
    ) -> JobExecutionResult:
        """Return a finished run's result, complete a pending commit, or run the job: one
        epoch if its sources are bounded, else epochs as ``trigger`` says.

        The driver holds the job's lease throughout (a second driver is refused), and
        records CANCELED if the run is interrupted (Ctrl-C, a second stop signal)."""
        started = time.perf_counter()
        run_id = new_run_id()
        lease = JobLease(
            self.storage, self.folder.path, self.config.job_name, run_id, self.config.lease_seconds
        )
        checkable = self.config.restore is None and self.epoch_frames.reuse
        with (
            run_settings(self.spark) as settings,  # first: the counts plan under it (AQE off)
            SourcePartitionCounts(
                self.transformations, self.config.max_parallelism, checkable
            ) as counts,
        ):
            lease.acquire()  # the job's identity is made under it at the first start
            job_signals.reclaim()  # from the SparkContext, which takes SIGINT when it starts
            metrics = self._metrics_recorder(run_id)
            try:
                self.folder.open()
                self.folder.lease = lease
                if lease.old_holder_may_publish:  # paused, elsewhere, or unknown: not now
                    self.coordinator.fence_next(run_id)
                metrics.start()
                with job_signals.on_cancel(self.cancel_spark_jobs):
                    return self._dispatch(
                        run_id, settings, counts, metrics, new_run, trigger, progress, started
                    )
            except KeyboardInterrupt as interrupt:
                run_end.failed(self, run_id, JobCanceled(f"interrupted ({interrupt!r})"))
                raise
            finally:
                metrics.close()
                self.folder.lease = None
                lease.release()

    def _dispatch(
        self,
        run_id: str,
        settings: RunSettings,
        counts: SourcePartitionCounts,
        metrics: MetricsRecorder,
        new_run: bool,
        trigger: EpochTrigger | None,
        progress: Progress | None,
        started: float,
    ) -> JobExecutionResult:
        """A stored result, a pending final commit, or a new run."""
        record = self.folder.read_record()
        latest = self.coordinator.latest()
        if not new_run:
            if record is not None and record.status == "FINISHED":
                return self.results.stored(record, started)
            if (
                latest is not None
                and latest.final
                and (record is None or record.run_id == latest.run_id)
            ):
                return self._complete_pending(run_id, latest, started)
            self.check_resumable(latest)
        self.coordinator.remove_orphaned_snapshots(run_id)
        run = JobRun(self, run_id, settings, counts, metrics, trigger, progress)
        schedule: Schedule = (
            MicroBatchEpochs(run) if run.streaming is not None else TriggeredEpochs(run)
        )
        return run.run_epochs(schedule, latest, started, new_run)

    def cancel_spark_jobs(self) -> None:
        """Cancel the job's running Spark jobs (classic session, else Spark Connect)."""
        try:
            self.spark.sparkContext.cancelAllJobs()
        except Exception:  # Spark Connect has no SparkContext
            self.spark.interruptAll()

    def check_resumable(self, latest: CompletedCheckpoint | None) -> None:
        """Refuse a start that would resume before a committed checkpoint: from an older
        checkpoint (the newest one's metadata lost) or from a savepoint older than it."""
        log = self.coordinator.commit_log
        restore = self.config.restore
        if restore is not None and restore.checkpoint.job_id == self.folder.job_id:
            log.check_resumable(restore.checkpoint_id, f"restoring {restore.checkpoint.path}")
        elif restore is None:
            log.check_resumable(latest.checkpoint_id if latest else None, "this start")

    def _complete_pending(
        self, run_id: str, checkpoint: CompletedCheckpoint, started: float
    ) -> JobExecutionResult:
        """Commit the final checkpoint an earlier run completed but did not commit, and
        store that run's result (its metrics as it kept them)."""
        try:
            self.coordinator.commit(checkpoint, self.sinks)
            self.abort_uncommitted(checkpoint.run_id, checkpoint.committables)
            self.coordinator.retain(self.config.retained_checkpoints)
        except Exception as error:
            run_end.failed(self, checkpoint.run_id, error)
            raise
        result = self.results.of(checkpoint, started, resumed=True)
        result.metrics = self.results.run_metrics(checkpoint.run_id)  # as that run kept them
        self.folder.record_finished(
            checkpoint.run_id, checkpoint.checkpoint_id, self.results.document(result)
        )
        final = self.storage.uri(self.folder.checkpoint_dir(checkpoint.checkpoint_id))
        JobControl(self.folder).answer_remaining(
            run_id, savepoint=final, checkpoint_id=checkpoint.checkpoint_id, final=True
        )
        return result

    def _metrics_recorder(self, run_id: str) -> MetricsRecorder:
        """A run's metrics recorder, as the job's config asks (on, off, a port)."""
        config = self.config
        return MetricsRecorder(
            self.storage,
            self.folder.path,
            config.job_name,
            run_id,
            enabled=config.metrics,
            port=config.metrics_port,
        )

    def abort_uncommitted(self, run_id: str, keep: dict[str, list[Any]]) -> None:
        """Have every sink drop what this job left that ``keep`` does not reference."""
        context = self.coordinator.commit_context(run_id, 0)
        for name, sink in self.sinks.items():
            sink.abort_uncommitted(context.for_sink(name), keep.get(name, []))


def new_run_id() -> str:
    """A new run's id (its files and staging names carry it)."""
    return uuid.uuid4().hex[:12]
