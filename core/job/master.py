"""The driver-side job master: plans an epoch into Spark stages, runs it with one action,
completes the checkpoint and has the sinks commit (ARCHITECTURE.md sections 1, 5)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator, CompletedCheckpoint
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.restore import RestoreSource, operator_uids, plan_restores
from flintlock.core.checkpoint.savepoints import EpochEndSavepoint, as_planned, new_savepoint_root
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.events import CheckpointBarrier
from flintlock.core.exchange.messages import Kind, check_for_driver, decode_json
from flintlock.core.hooks.reports import merge_reports
from flintlock.core.job import signals as job_signals
from flintlock.core.job.control import JobControl
from flintlock.core.job.epoch_loop import EpochLoop
from flintlock.core.job.epoch_run import Progress
from flintlock.core.job.lease import DEFAULT_RENEW_SECONDS, JobLease
from flintlock.core.job.progress import epoch_figures
from flintlock.core.job.result import JobExecutionResult, JobResults
from flintlock.core.job.run_log import RunLog, record_failure
from flintlock.core.job.streaming_epochs import StreamingEpochs
from flintlock.core.job_errors import JobCanceled, LeaseLostError, RestoreError
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.plan.graph import JobGraph, Transformation
from flintlock.core.spark.epoch_frames import EpochFrames
from flintlock.core.spark.failures import spark_failures_as_flintlock_errors, task_markers_dir
from flintlock.core.spark.job_group import epoch_running
from flintlock.core.spark.run_settings import RunSettings, run_settings
from flintlock.core.spark.source_partitions import SourcePartitionCounts

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


class JobMaster(JobResults):
    """Runs a bounded job as one epoch that ends in the final checkpoint.

    A start first reads the job's folder: a FINISHED run's stored result is returned as
    it is; a completed final checkpoint whose commit is pending is committed; otherwise
    (or when ``new_run`` is asked for) the job runs anew."""

    def __init__(
        self, spark: SparkSession, transformations: list[Transformation], config: JobConfig
    ) -> None:
        self.spark = spark
        self.epoch_end_savepoint: EpochEndSavepoint = as_planned  # EpochLoop's: a late stop
        self.epoch_frames = EpochFrames(spark)
        self.settings: RunSettings | None = None
        """The run's Spark settings while ``execute`` runs it."""
        self.source_counts: SourcePartitionCounts | None = None
        """The run's DataFrame sources, counted while ``execute`` starts it."""
        self.transformations = transformations
        self.config = config
        self.storage = CheckpointStorage.from_uri(config.checkpoint_uri)
        self.folder = JobFolder(self.storage, config.job_name)
        self.coordinator = CheckpointCoordinator(self.folder)
        self.sinks: dict[str, TwoPhaseCommitSink] = {
            t.name: t.sink for t in transformations if t.sink is not None
        }

    def execute(
        self,
        new_run: bool = False,
        trigger: EpochTrigger | None = None,
        progress: Progress | None = None,
    ) -> JobExecutionResult:
        """Return a finished run's result, complete a pending commit, or run the job: one
        epoch if its sources are bounded, else epochs as ``trigger`` says (``EpochLoop``).

        The driver holds the job's lease throughout (a second driver is refused), and
        records CANCELED if the run is interrupted (Ctrl-C, a second stop signal)."""
        started = time.perf_counter()
        self.run_id = self.new_run_id()
        lease = JobLease(
            self.storage,
            self.folder.path,
            self.config.job_name,
            self.run_id,
            self.config.lease_seconds,
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
            self.metrics = self.metrics_recorder()
            try:
                self.folder.open()
                self.folder.lease = lease
                if lease.old_holder_may_publish:  # paused, elsewhere, or unknown: not now
                    self.coordinator.fence_next(self.run_id)
                self.metrics.start()
                with job_signals.on_cancel(self.cancel_spark_jobs):
                    self.settings, self.source_counts = settings, counts
                    return self._execute(new_run, trigger, progress, started)
            except KeyboardInterrupt as interrupt:
                self.record_failed(self.run_id, JobCanceled(f"interrupted ({interrupt!r})"))
                raise
            finally:
                self.settings = self.source_counts = None
                self.metrics.close()
                self.folder.lease = None
                lease.release()

    def _execute(
        self,
        new_run: bool,
        trigger: EpochTrigger | None,
        progress: Progress | None,
        started: float,
    ) -> JobExecutionResult:
        record = self.folder.read_record()
        latest = self.coordinator.latest()
        if not new_run:
            if record is not None and record.status == "FINISHED":
                return self._stored_result(record, started)
            if (
                latest is not None
                and latest.final
                and (record is None or record.run_id == latest.run_id)
            ):
                return self._complete(latest, started, resumed=True)
            self.check_resumable(latest)
        self.coordinator.remove_orphaned_snapshots(self.run_id)
        loop = EpochLoop(self, trigger or EpochTrigger.processing_time(0.0), progress)
        if loop.streaming is not None:
            return StreamingEpochs(loop).run(latest, started, new_run)
        if loop.sources:
            return loop.run(latest, started, new_run)
        return self._run(latest, started, loop.graph, progress)

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

    def next_checkpoint_id(self, latest: CompletedCheckpoint | None) -> int:
        """A run's first checkpoint id: above every id used (completed, committed, fenced)."""
        highest = self.coordinator.highest_id()
        return max(highest, latest.checkpoint_id if latest is not None else 0) + 1

    def new_run_id(self) -> str:
        """A new run's id (its files and staging names carry it)."""
        return uuid.uuid4().hex[:12]

    def _run(
        self,
        latest: CompletedCheckpoint | None,
        started: float,
        graph: JobGraph,
        progress: Progress | None = None,
    ) -> JobExecutionResult:
        """Run the job anew: one epoch ending in the final checkpoint, then the commits;
        ``graph`` is the run's (its DataFrame sources counted once, ``EpochRun``);
        ``progress`` gets the epoch's figures."""
        checkpoint_id = self.next_checkpoint_id(latest)
        run_id = self.run_id
        restore = self.config.restore
        restores = {}
        if restore is not None:
            self.check_restore_storage(restore)
            checkpoint_id = max(checkpoint_id, restore.checkpoint_id + 1)
            restores = plan_restores(restore, graph)
        savepoint_dir = self.config.savepoint_dir  # the folder the final snapshot goes to
        root = (
            new_savepoint_root(self.storage, savepoint_dir, checkpoint_id)
            if savepoint_dir
            else None
        )
        context = self.coordinator.commit_context(run_id, checkpoint_id)
        for name, sink in self.sinks.items():  # refuse before anything is recorded or written
            sink.prepare_output(context.for_sink(name))
        self.folder.record_running(run_id)
        pending = latest is not None and not latest.final and not latest.committed
        self.abort_uncommitted(run_id, latest.committables if pending and latest else {})
        plan = ExecutionPlan(
            job_name=self.config.job_name,
            run_id=run_id,
            epoch=checkpoint_id,
            barrier=CheckpointBarrier(checkpoint_id, "savepoint" if root else "checkpoint", True),
            checkpoint_uri=self.config.checkpoint_uri,
            max_parallelism=self.config.max_parallelism,
            state_backend=self.config.state_backend,
            graph=graph,
            plugins=self.config.plugins,
            job_id=self.folder.job_id,
            restores=restores,
            snapshot_root=root,
            metrics=self.config.metrics,
        )
        run_log = RunLog(self.folder, graph)
        run_log.record_run(run_id)
        epoch_started = time.monotonic()
        try:
            checkpoint = self.run_epoch(plan, final=True, details=self.checkpoint_details(graph))
        except Exception as failure:
            error = job_signals.as_canceled(failure)
            self.record_failed(run_id, error)
            if error is failure:
                raise
            raise error from failure
        figures = {"kind": plan.barrier.kind, "final": True, "time": time.time()}
        figures["seconds"] = round(time.monotonic() - epoch_started, 4)
        run_log.record_epoch(plan, checkpoint, figures)
        result = self._complete(checkpoint, started)
        if progress is not None:
            progress(epoch_figures(checkpoint, plan.barrier.kind, time.perf_counter() - started))
        return result

    def run_epoch(
        self, plan: ExecutionPlan, final: bool, details: dict[str, Any], epoch: int = 1
    ) -> CompletedCheckpoint:
        """Run the run's epoch ``epoch`` as one Spark job (one action) and complete its
        checkpoint; a job canceled (a second Ctrl-C) before or while it ran completes
        nothing."""
        failures = spark_failures_as_flintlock_errors(
            self.storage, plan.job_name, plan.run_id, self.transformations
        )
        job_signals.check_canceled()
        settings = self.settings
        if settings is None:
            raise RuntimeError("JobMaster.run_epoch runs only inside JobMaster.execute")
        running = epoch_running(plan.job_name, epoch, plan.barrier.checkpoint_id, plan.run_id)
        frames = self.epoch_frames
        with failures, running as job:
            frame = frames.frame_for(plan)
            with settings.epoch(job, frames.task_property(plan) if frames.reuse else ""):
                messages = frame.toArrow()
        job_signals.check_canceled()  # the cancel came before Spark had the job to cancel
        # the tasks' markers name a crashed worker's subtask: of no use once the job ran
        self.storage.delete_dir(task_markers_dir(self.storage, plan.job_name, plan.run_id))
        acknowledgements, root = self.epoch_end_savepoint(plan, self._read_messages(messages))
        return self.coordinator.complete(
            plan.barrier.checkpoint_id,
            plan.run_id,
            final,
            acknowledgements,
            plan.expected_subtasks(),
            details,
            snapshot_root=root,
        )

    def _complete(
        self, checkpoint: CompletedCheckpoint, started: float, resumed: bool = False
    ) -> JobExecutionResult:
        """Commit the final checkpoint (idempotent), clean up, store the job's result."""
        try:
            self.coordinator.commit(checkpoint, self.sinks)
            self.abort_uncommitted(checkpoint.run_id, checkpoint.committables)
            self.coordinator.retain(self.config.retained_checkpoints)
        except Exception as error:
            self.record_failed(checkpoint.run_id, error)
            raise
        result = self.result_of(checkpoint, started, resumed=resumed)
        result.metrics = self.final_metrics(checkpoint, started, resumed)
        self.folder.record_finished(
            checkpoint.run_id, checkpoint.checkpoint_id, self.result_document(result)
        )
        final = f"{self.folder.checkpoints}/chk-{checkpoint.checkpoint_id}"
        JobControl(self.folder).answer_remaining(
            self.run_id, savepoint=final, checkpoint_id=checkpoint.checkpoint_id, final=True
        )
        return result

    def check_restore_storage(self, restore: RestoreSource) -> None:
        """Tasks read the restored files through the job's checkpoint file system."""
        theirs = type(restore.checkpoint.storage.filesystem).__name__
        ours = type(self.storage.filesystem).__name__
        if theirs != ours:
            raise RestoreError(
                f"checkpoint {restore.checkpoint.path} is on a {theirs}, the job's checkpoint "
                f"directory {self.config.checkpoint_uri} on a {ours}: copy it there first"
            )

    def checkpoint_details(self, graph: JobGraph) -> dict[str, Any]:
        """What the metadata records besides acknowledgements: operators by name with
        their uid, vertex and parallelism; max parallelism; the checkpoint restored from;
        the graph (vertices, edges, partitioners)."""
        uids = operator_uids(self.transformations)
        operators = {
            t.name: {"uid": uids[t.name], "vertex": v.name, "parallelism": v.parallelism}
            for v in graph.vertices.values()
            for t in v.transformations
        }
        restore = self.config.restore
        restored_from = None
        if restore is not None:
            restored_from = {
                "path": restore.checkpoint.path,
                "job_name": restore.checkpoint.job_name,
                "checkpoint_id": restore.checkpoint_id,
                "skipped_uids": restore.dropped,
            }
        return {
            "operators": operators,
            "max_parallelism": self.config.max_parallelism,
            "restored_from": restored_from,
            "graph": graph.to_json(),
        }

    def record_failed(self, run_id: str, error: Exception) -> None:
        """Record FAILED (CANCELED for a canceled run; nothing once the lease is lost:
        the result store belongs to the driver that took it); if even that fails, say so
        on the error being raised."""
        if isinstance(error, LeaseLostError):
            return
        try:
            if isinstance(error, JobCanceled):
                latest = self.coordinator.latest()
                at = latest.checkpoint_id if latest is not None else None
                self.folder.record_canceled(run_id, at)
            else:
                self.folder.record_failed(run_id, error)
                record_failure(self.folder, run_id, error)  # for the run report
        except Exception as recording:  # the job's own error matters more
            if hasattr(error, "add_note"):
                error.add_note(f"(the job's FAILED result could not be recorded: {recording})")

    def _read_messages(self, messages: pa.Table) -> list[dict[str, Any]]:
        """Acknowledgements for the coordinator; reports go back to their plugins. The last
        stage sends nothing else to the driver (a message for a vertex is a routing bug)."""
        check_for_driver(messages)
        acknowledgements, reports = [], []
        phases: dict[tuple[str, int, int], dict[str, list[float]]] = {}
        kinds = messages.column("kind").to_pylist()
        payloads = messages.column("payload").to_pylist()
        for kind, payload in zip(kinds, payloads, strict=True):
            document = decode_json(payload)
            if kind == Kind.ACK:
                acknowledgements.append(document)
            elif kind == Kind.REPORT and "lifecycle_phases" in document:
                phases[subtask_attempt(document)] = document["lifecycle_phases"]
            elif kind == Kind.REPORT:
                reports.append(document)
        merge_reports(self.config.plugins, reports)  # to the plugins, through their hook
        for acknowledgement in acknowledgements:  # times of close come after the ack
            acknowledgement["lifecycle_phases"] = phases.get(subtask_attempt(acknowledgement), {})
        return acknowledgements

    def abort_uncommitted(self, run_id: str, keep: dict[str, list[Any]]) -> None:
        """Have every sink drop what this job left that ``keep`` does not reference."""
        context = self.coordinator.commit_context(run_id, 0)
        for name, sink in self.sinks.items():
            sink.abort_uncommitted(context.for_sink(name), keep.get(name, []))


def subtask_attempt(document: dict[str, Any]) -> tuple[str, int, int]:
    """The (task, subtask, attempt) an acknowledgement or phase report comes from."""
    return document["task_name"], document["subtask_index"], document["attempt_id"]
