"""One run of a job on the driver, from its start point to its result (``JobRun``).

A run is made with its id, its Spark settings and its sources' partition counts; it
builds its graph at once. Each epoch is planned in one method (``plan``), run as one
Spark job whose checkpoint completes in one method (``run_epoch``), and committed in
one (``commit_epoch``); how the run starts is ``run_start``, how it ends ``run_end``.
The schedules decide when epochs run: one epoch for bounded sources
(``schedules.run_bounded``), epochs as a trigger says for unbounded ones
(``schedules.TriggeredEpochs``), a streaming DataFrame's micro-batches
(``micro_batches.MicroBatchEpochs``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
from flintlock.core.checkpoint.finished_subtasks import finished_subtasks
from flintlock.core.checkpoint.restore import (
    finished_in,
    operator_uids,
    plan_restores,
)
from flintlock.core.checkpoint.savepoints import (
    EpochEndSavepoint,
    as_planned,
    free_savepoint_root,
    new_savepoint_root,
    snapshots_moved_to,
)
from flintlock.core.checkpoint.snapshots import TaskAcknowledgement, TaskRestore
from flintlock.core.errors import CheckpointError, LeaseLostError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.exchange.messages import Kind, check_for_driver, decode_json
from flintlock.core.exchange.reports import PhaseReport
from flintlock.core.hooks.reports import PluginReport, merge_reports
from flintlock.core.job import run_commits, run_end, run_start
from flintlock.core.job import signals as job_signals
from flintlock.core.job.control import SIGNAL, ControlRequest, JobControl
from flintlock.core.job.run_log import RunLog
from flintlock.core.job.schedules import Epoch, Position, Schedule
from flintlock.core.metrics.recorder import MetricsRecorder
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.sources.epochs import EpochSplits
from flintlock.core.spark.failures import spark_failures_as_flintlock_errors
from flintlock.core.spark.job_group import epoch_running
from flintlock.core.spark.run_settings import RunSettings
from flintlock.core.spark.source_partitions import SourcePartitionCounts

if TYPE_CHECKING:
    from flintlock.core.job.master import JobMaster
    from flintlock.core.job.result import JobExecutionResult

Progress = Callable[[dict[str, Any]], None]
"""Called on the driver after every epoch with its figures (the CLI prints a line)."""


class JobRun:
    """One run of a job: its graph, its epochs' plans, Spark jobs, checkpoints and
    commits, and what it has done so far (epochs, records, collected rows)."""

    def __init__(
        self,
        master: JobMaster,
        run_id: str,
        settings: RunSettings,
        counts: SourcePartitionCounts,
        metrics: MetricsRecorder,
        trigger: EpochTrigger | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.master = master
        self.run_id = run_id
        self.settings = settings
        self.metrics = metrics
        self.trigger = trigger or EpochTrigger.processing_time(0.0)
        self.progress = progress
        self.config, self.folder, self.storage = master.config, master.folder, master.storage
        self.coordinator, self.sinks = master.coordinator, master.sinks
        self.spark, self.epoch_frames, self.results = (
            master.spark,
            master.epoch_frames,
            master.results,
        )
        self.control = JobControl(self.folder)
        self.uids = operator_uids(master.transformations)
        self.graph_transformations, self.graph = run_start.run_graph(self, counts)
        self.run_log = RunLog(self.folder, self.graph)
        self.sources, self.streaming, self.bounded_sources = run_start.job_sources(
            master.transformations, self.graph
        )
        self.epochs: list[dict[str, Any]] = []
        """Each completed epoch's figures, in order."""
        self.records_out: dict[str, int] = {}
        self.collected: dict[str, list[pa.Table]] = {}
        """Each collect sink's committed rows, epoch by epoch, for the run's result."""
        self.collected_paths: dict[str, list[str]] = {}
        """The files holding them (the result store keeps these)."""
        self.epoch_end_savepoint: EpochEndSavepoint = as_planned
        """How an epoch's snapshots complete: as planned, or as a savepoint asked late."""
        self.request_at_epoch_end: ControlRequest | None = None
        """A stop or savepoint asked while the current epoch ran, taken at its end."""
        self.takes_requests = True
        """False for a bounded job's one epoch: no requests, no status file."""
        self.pending_commit = run_commits.PendingCommit()
        """The last checkpoint's commit while it runs beside the next epoch."""
        self.epochs_checkpointed = 0  # their figures may still be on the way
        self.none_asked_at_epoch_end = False
        """The epoch's end found no request: the next look (the next epoch's plan, a
        moment later) needs no request to the job folder; the epoch after's end looks."""

    # ---- the run ----

    def run_epochs(
        self,
        schedule: Schedule,
        latest: CompletedCheckpoint | None,
        started: float,
        new_run: bool,
    ) -> JobExecutionResult:
        """From the run's start point (fresh, ``restore_from``, or the job's latest
        checkpoint), run the epochs ``schedule`` gives until the input ends, a stop, or
        the schedule has none: each is planned, run, checkpointed, committed, and its
        request answered. The run's result; a failure is recorded and raised."""
        start = run_start.starting_point(self, latest, new_run)
        self.folder.record_running(self.run_id)
        self.control.expire_requests(self.run_id)  # a new run never acts on an old request
        restores = plan_restores(start.restore, self.graph) if start.restore else {}
        position = Position(
            latest,
            start.checkpoint_id,
            dict(start.source_states),
            restores,
            finished_in(start.restore),  # fully finished vertices: skipped (FLIP-147)
        )
        self.takes_requests = schedule.takes_requests
        self.epoch_end_savepoint = (
            self.savepoint_at_epoch_end if self.takes_requests else as_planned
        )
        try:
            schedule.start(position)
            while (epoch := schedule.next_epoch(position)) is not None:
                began = time.monotonic()
                plan, checkpoint = self._checkpointed(epoch, position)
                if plan is None or checkpoint is None:  # its savepoint failed: the job goes on
                    schedule.savepoint_failed(epoch, position)
                    continue
                request = epoch.request or self.request_at_epoch_end
                ends = epoch.input_ends or (request is not None and request.action == "stop")
                if request is None and not ends and run_commits.commits_beside(self, schedule):
                    run_commits.beside_next_epoch(self, schedule, epoch, plan, checkpoint, began)
                    self.advance(position, epoch, checkpoint)
                    continue
                self.commit_epoch(checkpoint, plan, began)
                schedule.epoch_done(epoch)
                savepoint = self.savepoint_uri(checkpoint)
                if request is not None:
                    self.control.answer(
                        request, savepoint=savepoint, checkpoint_id=checkpoint.checkpoint_id
                    )
                if ends:
                    return run_end.ended(self, checkpoint, started, savepoint, epoch.input_ends)
                self.advance(position, epoch, checkpoint)
            self.pending_commit.wait()
            return run_end.stopped(self, position.checkpoint, started, None)
        except BaseException as failure:
            self.pending_commit.wait_noting(failure)
            error = run_end.failed_run(self, failure) if isinstance(failure, Exception) else None
            if error is None or error is failure:
                raise
            raise error from failure
        finally:
            self.epoch_end_savepoint = as_planned
            schedule.close()

    def advance(self, position: Position, epoch: Epoch, checkpoint: CompletedCheckpoint) -> None:
        """Move ``position`` past ``epoch``, whose ``checkpoint`` completed."""
        position.checkpoint, position.aborted = checkpoint, []
        position.checkpoint_id = checkpoint.checkpoint_id + 1
        position.source_states = {uid: p.state for uid, p in epoch.planned.items()}
        position.finished = checkpoint.finished_vertices()
        position.restores = run_start.restores_after(self, checkpoint)

    def _checkpointed(
        self, epoch: Epoch, position: Position
    ) -> tuple[ExecutionPlan, CompletedCheckpoint] | tuple[None, None]:
        """The epoch's plan and completed checkpoint: a savepoint if a request asks (or
        the job's input ends under its ``savepoint_dir``). A savepoint that fails before
        it completed fails its request, not the job (None), unless the run lost its lease;
        a commit that fails after it completed fails the job."""
        request = epoch.request
        savepoint = request is not None or (epoch.input_ends and bool(self.config.savepoint_dir))
        kind: Literal["checkpoint", "savepoint"] = "savepoint" if savepoint else "checkpoint"
        barrier = CheckpointBarrier(epoch.checkpoint_id, kind, final=epoch.input_ends)
        self.request_at_epoch_end = None
        if request is not None:  # a commit's failure fails the job, never only a request
            self.pending_commit.wait()
        try:
            root = self.savepoint_root(epoch.checkpoint_id) if savepoint else None
            plan = self.plan(
                barrier,
                position.restores,
                position.aborted,
                epoch.planned,
                epoch.source_ends,
                root,
            )
            plan.finished_vertices = dict(position.finished)
            return plan, self.run_epoch(plan, epoch.planned)
        except Exception as error:
            if request is None or isinstance(error, LeaseLostError):
                raise  # a run that lost its lease goes no further: its requests are not its own
            self.control.answer(request, error=f"{type(error).__name__}: {error}")
            return None, None

    # ---- requests ----

    def next_request(self) -> ControlRequest | None:
        """A stop asked for by a signal to the driver (Ctrl-C), else the oldest request
        sent to this run."""
        job_signals.check_canceled()
        if job_signals.stop_requested():
            return ControlRequest(SIGNAL, "stop", run_id=self.run_id)
        if self.none_asked_at_epoch_end:
            self.none_asked_at_epoch_end = False
            return None
        return self.control.next_request(self.run_id)

    # ---- one epoch ----

    def plan(
        self,
        barrier: CheckpointBarrier,
        restores: dict[tuple[int, int], TaskRestore] | None = None,
        aborted: list[int] | None = None,
        planned: dict[str, EpochSplits] | None = None,
        ends: bool | dict[str, bool] = True,
        snapshot_root: str | None = None,
    ) -> ExecutionPlan:
        """The execution plan of one epoch: what it restores (tasks hear of ``aborted``
        checkpoints), the unbounded sources' splits (``planned``, by uid) and whether
        each source's input ends (``ends``: for all, or by uid; FLIP-147); a savepoint's
        tasks write to ``snapshot_root``."""
        restores = restores or {}
        if aborted:
            restores = {key: replace(r, aborted=list(aborted)) for key, r in restores.items()}
        planned = planned or {}
        config = self.config
        return ExecutionPlan(
            job_name=config.job_name,
            run_id=self.run_id,
            epoch=barrier.checkpoint_id,
            barrier=barrier,
            checkpoint_uri=config.checkpoint_uri,
            storage_options=config.storage_options,
            max_parallelism=config.max_parallelism,
            state_backend=config.state_backend,
            graph=self.graph,
            plugins=config.plugins,
            job_id=self.folder.job_id,
            restores=restores,
            source_epochs={
                name: planned[uid].source_epochs(ends if isinstance(ends, bool) else ends[uid])
                for name, uid in self.uids.items()
                if uid in planned
            },
            snapshot_root=snapshot_root,
            finished_subtasks=finished_subtasks(self.graph, restores),
            metrics=config.metrics,
        )

    def run_epoch(
        self, plan: ExecutionPlan, planned: dict[str, EpochSplits] | None = None
    ) -> CompletedCheckpoint:
        """Run the epoch as one Spark job (one action) and complete its checkpoint, with
        the sources' states: the part a failed savepoint may undo (nothing of it was
        published). A job canceled (a second Ctrl-C) before or while it ran completes
        nothing."""
        master = self.master
        failures = spark_failures_as_flintlock_errors(
            self.storage, plan.job_name, plan.run_id, master.transformations, plan.epoch
        )
        job_signals.check_canceled()
        epoch = self.epochs_checkpointed + 1  # the number its figures will carry
        running = epoch_running(plan.job_name, epoch, plan.barrier.checkpoint_id, plan.run_id)
        frames = self.epoch_frames
        with failures, running as job:
            frame = frames.frame_for(plan)
            with self.settings.epoch(job, frames.task_property(plan) if frames.reuse else ""):
                messages = frame.toArrow()
        job_signals.check_canceled()  # the cancel came before Spark had the job to cancel
        acknowledged = self._read_messages(messages)
        self.pending_commit.wait()  # the last checkpoint's commit beside this epoch, shown
        acknowledgements, root = self.epoch_end_savepoint(plan, acknowledged)
        details = run_start.checkpoint_details(self)
        if planned is not None:
            details["sources"] = {uid: p.state for uid, p in planned.items()}
        checkpoint = self.coordinator.complete(
            plan.barrier.checkpoint_id,
            plan.run_id,
            plan.barrier.final,
            acknowledgements,
            plan.expected_subtasks(),
            details,
            snapshot_root=root,
        )
        self.epochs_checkpointed += 1
        return checkpoint

    def commit_epoch(
        self, checkpoint: CompletedCheckpoint, plan: ExecutionPlan, began: float
    ) -> None:
        """Once the checkpoint completed: the commit (a failure fails the job, never only
        a request: the next start completes it); then side by side what dead attempts of
        the epoch staged (a worker killed mid-epoch), retention and the epoch's figures."""
        self.coordinator.commit(checkpoint, self.sinks)
        figures = run_commits.after_commit(self, plan, checkpoint, began, abort=True)
        run_commits.notify_sources(self, checkpoint)
        run_end.show_progress(self, figures)

    def abort_uncommitted(self, keep: dict[str, list[Any]]) -> None:
        """Have every sink drop what this job left that ``keep`` does not reference."""
        self.master.abort_uncommitted(self.run_id, keep)

    def _read_messages(self, messages: pa.Table) -> list[TaskAcknowledgement]:
        """Acknowledgements for the coordinator; reports go back to their plugins. The last
        stage sends nothing else to the driver (a message for a vertex is a routing bug)."""
        check_for_driver(messages)
        acknowledgements: list[TaskAcknowledgement] = []
        reports: list[PluginReport] = []
        phases: dict[tuple[str, int, int], dict[str, list[float]]] = {}
        kinds = messages.column("kind").to_pylist()
        payloads = messages.column("payload").to_pylist()
        for kind, payload in zip(kinds, payloads, strict=True):
            document = decode_json(payload)
            if kind == Kind.ACK:
                acknowledgements.append(TaskAcknowledgement.from_json(document))
                continue
            if PhaseReport.carried_by(document):  # the last stage sends nothing else
                phase_report = PhaseReport.from_json(document)
                phases[phase_report.attempt] = phase_report.lifecycle_phases
            else:
                reports.append(PluginReport.from_json(document))
        merge_reports(self.config.plugins, reports)  # to the plugins, through their hook
        return [  # times of close come after the ack
            replace(ack, lifecycle_phases=phases.get(ack.attempt, {})) for ack in acknowledgements
        ]

    # ---- savepoints ----

    def savepoint_root(self, checkpoint_id: int) -> str:
        """A new self-contained folder for the savepoint taken as ``checkpoint_id``: under
        the job's ``savepoint_dir``, by default ``<job folder>/savepoints``."""
        if self.config.savepoint_dir:
            return new_savepoint_root(self.storage, self.config.savepoint_dir, checkpoint_id)
        default = f"{self.folder.path}/savepoints"  # a path on the job's file system
        return free_savepoint_root(self.storage, default, checkpoint_id)

    def savepoint_at_epoch_end(
        self, plan: ExecutionPlan, acknowledgements: list[TaskAcknowledgement]
    ) -> tuple[list[TaskAcknowledgement], str | None]:
        """A stop without drain or a savepoint asked while the epoch ran is taken at its
        end, as Flink takes either at the next barrier: the epoch's snapshots move into a
        new savepoint folder and its checkpoint completes as that savepoint
        (``request_at_epoch_end`` then names the request). A drain needs an epoch whose
        input ends, so it waits for the next one, as does everything when the snapshots
        cannot be moved."""
        if plan.barrier.final or plan.snapshot_root is not None:
            return as_planned(plan, acknowledgements)
        request = self.next_request()
        self.none_asked_at_epoch_end = request is None
        if request is None or (request.action == "stop" and request.drain):
            return as_planned(plan, acknowledgements)
        try:
            root = self.savepoint_root(plan.barrier.checkpoint_id)
            moved = snapshots_moved_to(self.storage, acknowledgements, root)
        except (OSError, CheckpointError):
            return as_planned(plan, acknowledgements)
        plan.barrier = replace(plan.barrier, kind="savepoint")
        self.request_at_epoch_end = request
        return moved, root

    def savepoint_uri(self, checkpoint: CompletedCheckpoint) -> str | None:
        """The checkpoint's savepoint folder as users pass it back (with its scheme)."""
        savepoint = checkpoint.savepoint
        return self.storage.uri(savepoint) if savepoint is not None else None

    def checkpoint_uri(self, checkpoint_id: int) -> str:
        """A completed checkpoint's folder as users pass it back (with its scheme)."""
        return self.storage.uri(self.folder.checkpoint_dir(checkpoint_id))
