"""An unbounded job as a sequence of epochs (ARCHITECTURE.md sections 3 and 5, FLIP-147).

Each epoch is one Spark job over what the sources' enumerators planned for it, and ends
in a checkpoint that records the enumerators' states; the sinks commit it before the
next epoch starts, so output appears once per epoch, exactly once. The next epoch
restores the checkpoint (its operators get ``notify_checkpoint_complete`` for it before
any data). Between epochs the loop takes savepoint and stop requests (``JobControl``).

How an epoch ends (the termination table):

- sources exhausted, or a stop with drain: MAX_WATERMARK, end_input, finish, then the
  final checkpoint (a savepoint for a drain), its commit, and FINISHED (a drain too,
  as Flink reports it; see ``EpochRun.ended``);
- a stop without drain: a savepoint without finish, its commit, STOPPED; a stop asked
  while an epoch runs is taken at that epoch's end (its checkpoint becomes the savepoint,
  no further epoch runs), as Flink's stop-with-savepoint takes the next barrier;
- otherwise: a checkpoint without finish, its commit, and the next epoch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING, Any

from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
from flintlock.core.checkpoint.finished_subtasks import epoch_has_work
from flintlock.core.checkpoint.restore import (
    RestoreSource,
    plan_restores,
)
from flintlock.core.checkpoint.savepoints import as_planned, snapshots_moved_to
from flintlock.core.errors import CheckpointError, GraphError, LeaseLostError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.job import signals as job_signals
from flintlock.core.job.control import ControlRequest
from flintlock.core.job.epoch_run import EpochRun
from flintlock.core.sources.epochs import EpochSplits
from flintlock.core.spark.keep_alive import HOLD_SECONDS, keep_alive_seconds, keep_workers_alive

if TYPE_CHECKING:
    from flintlock.core.job.result import JobExecutionResult
    from flintlock.core.plan.execution import ExecutionPlan


class EpochLoop(EpochRun):
    """Runs one job run as epochs until its input ends, a stop, or its trigger says so."""

    stop_at_epoch_end: ControlRequest | None = None
    """The stop asked while the current epoch ran, taken at its end (its savepoint)."""

    # ---- the run ----

    def run(
        self, latest: CompletedCheckpoint | None, started: float, new_run: bool
    ) -> JobExecutionResult:
        """Start (fresh, from ``restore_from``, or continuing the job's last checkpoint)
        and run epochs; the result of the run when it finishes or stops."""
        master = self.master
        run_id = master.run_id
        restore, states, checkpoint_id = self.starting_point(latest, new_run, run_id)
        master.folder.record_running(run_id)
        self.control.expire_requests(run_id)  # a new run never acts on an old request
        restores = plan_restores(restore, self.graph) if restore is not None else {}
        finished = finished_in(restore)  # fully finished vertices: skipped (FLIP-147)
        aborted: list[int] = []
        checkpoint: CompletedCheckpoint | None = latest
        epoch_started = time.monotonic()
        master.epoch_end_savepoint = self._savepoint_at_epoch_end
        try:
            while True:
                request = self.next_request(run_id)
                planned = self._plan_sources(states)
                drain = request is not None and request.action == "stop" and request.drain
                source_ends = {uid: drain or p.exhausted for uid, p in planned.items()}
                ends = all(source_ends.values())  # the job's input ends: its final checkpoint
                has_rows = epoch_has_work(
                    self.graph, self.uids, planned, source_ends, finished, restores
                )  # a source subtask whose input ends now finishes in an epoch of its own
                if self._out_of_input(request, ends, has_rows):
                    return self.stopped(checkpoint, run_id, started, None)
                if self._skip_empty(request, ends, has_rows):
                    epoch_started = self._wait_for_next_epoch(run_id, epoch_started, 0.05)
                    continue
                barrier = CheckpointBarrier(
                    checkpoint_id, "savepoint" if request else "checkpoint", final=ends
                )
                root = self.savepoint_root(checkpoint_id) if request is not None else None
                plan = self.plan(run_id, barrier, restores, aborted, planned, source_ends, root)
                plan.finished_vertices = dict(finished)
                self.stop_at_epoch_end = None
                try:
                    checkpoint = self.checkpoint_epoch(plan, planned)
                    if request is None and self.stop_at_epoch_end is not None:
                        request = self.stop_at_epoch_end  # its savepoint is this checkpoint
                except Exception as error:
                    if request is None:
                        raise
                    # a savepoint that failed before it completed fails the request (a stop
                    # too), not the job: it goes on from its last checkpoint; tasks hear of
                    # the aborted one. A commit that fails after it completed fails the job.
                    self.control.answer(request, error=f"{type(error).__name__}: {error}")
                    aborted.append(checkpoint_id)
                    checkpoint_id += 1
                    continue
                self.commit_epoch(plan, checkpoint, epoch_started)
                states = {uid: p.state for uid, p in planned.items()}
                finished = checkpoint.finished_vertices()
                savepoint = checkpoint.savepoint
                if request is not None:
                    self.control.answer(request, savepoint=savepoint, checkpoint_id=checkpoint_id)
                if ends or (request is not None and request.action == "stop"):
                    return self.ended(checkpoint, run_id, started, savepoint, ends)
                if self.trigger.kind == "once":
                    return self.stopped(checkpoint, run_id, started, None)
                restores, aborted = self.restores_after(checkpoint), []
                checkpoint_id += 1
                epoch_started = self._wait_for_next_epoch(run_id, epoch_started)
        except Exception as failure:
            error = job_signals.as_canceled(failure)
            master.record_failed(run_id, error)
            if not isinstance(error, LeaseLostError):  # else the requests are not ours
                with contextlib.suppress(Exception):  # the run's own error matters more
                    self.control.answer_remaining(run_id, error=f"{type(error).__name__}: {error}")
            if error is failure:
                raise
            raise error from failure
        finally:
            master.epoch_end_savepoint = as_planned

    def _savepoint_at_epoch_end(
        self, plan: ExecutionPlan, acknowledgements: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A stop without drain asked while the epoch ran is taken at its end, as Flink's
        stop-with-savepoint is (no further epoch): the epoch's snapshots move into a new
        savepoint folder and its checkpoint completes as that savepoint. A drain needs an
        epoch whose input ends, so it waits for the next one, as does everything when the
        snapshots cannot be moved (the stop is then taken one epoch later)."""
        if plan.barrier.final or plan.snapshot_root is not None:
            return as_planned(plan, acknowledgements)
        request = self.next_request(plan.run_id)
        if request is None or request.action != "stop" or request.drain:
            return as_planned(plan, acknowledgements)
        try:
            root = self.savepoint_root(plan.barrier.checkpoint_id)
            moved = snapshots_moved_to(self.master.storage, acknowledgements, root)
        except (OSError, CheckpointError):
            return as_planned(plan, acknowledgements)
        plan.barrier = dataclasses.replace(plan.barrier, kind="savepoint")
        self.stop_at_epoch_end = request
        return moved, root

    def _plan_sources(self, states: dict[str, Any]) -> dict[str, EpochSplits]:
        """Each unbounded source's splits for the epoch starting now (by uid)."""
        now_ms = int(time.time() * 1000)
        planned = {}
        for name, (source, parallelism) in self.sources.items():
            uid = self.uids[name]
            state = states[uid] if uid in states else source.initial_state(now_ms)
            splits = source.plan_epoch(state, now_ms, parallelism)
            if len(splits.assignments) != parallelism:
                raise GraphError(
                    f"source '{name}' planned {len(splits.assignments)} assignments for "
                    f"{parallelism} subtasks"
                )
            planned[uid] = splits
        return planned

    def _out_of_input(self, request: ControlRequest | None, ends: bool, has_rows: bool) -> bool:
        """An available-now run stops once its sources have nothing more right now."""
        idle = request is None and not ends and not has_rows
        return idle and self.trigger.kind == "available_now" and bool(self.epochs)

    def _skip_empty(self, request: ControlRequest | None, ends: bool, has_rows: bool) -> bool:
        """With no interval (epochs back to back), an epoch with nothing to read is not run."""
        idle = request is None and not ends and not has_rows
        return idle and self.trigger.kind == "processing_time" and not self.trigger.interval_seconds

    def _wait_for_next_epoch(
        self, run_id: str, epoch_started: float, at_least: float = 0.0
    ) -> float:
        """Sleep until the trigger's next epoch (a request starts it at once); a long
        wait touches the Python workers before Spark stops them as idle."""
        due = epoch_started + max(self.trigger.interval_seconds, at_least)
        period, touched = keep_alive_seconds(), time.monotonic()
        while time.monotonic() < due and self.next_request(run_id) is None:
            now = time.monotonic()
            if period and now - touched >= period and due - now > 2 * HOLD_SECONDS:
                keep_workers_alive(self.master.spark, self.master.config.job_name)
                touched = time.monotonic()
            time.sleep(min(0.05, max(0.0, due - time.monotonic())))
        return time.monotonic()


def finished_in(restore: RestoreSource | None) -> dict[str, int]:
    """The fully finished vertices of the checkpoint restored from (vertex name -> the
    checkpoint it finished in): every subtask's snapshot says it finished. A final
    checkpoint (every vertex finished) restored by a new run is run again in full."""
    if restore is None or restore.checkpoint.final:
        return {}
    finished: dict[str, int | None] = {}
    for snapshot in restore.checkpoint.subtasks:
        at = snapshot.finished_at
        known = finished.get(snapshot.task_name, at)
        finished[snapshot.task_name] = None if at is None or known is None else max(at, known)
    return {name: at for name, at in finished.items() if at is not None}
