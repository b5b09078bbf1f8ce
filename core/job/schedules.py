"""When a run's epochs run: one epoch for bounded sources, epochs as the trigger says for
unbounded ones (ARCHITECTURE.md sections 3 and 5, FLIP-147).

Each epoch is one Spark job over what the sources' enumerators planned for it, and ends
in a checkpoint that records the enumerators' states; the sinks commit it before the
next epoch starts, so output appears once per epoch, exactly once. The next epoch
restores the checkpoint (its operators get ``notify_checkpoint_complete`` for it before
any data). Between epochs the loop takes savepoint and stop requests (``JobControl``).

How an epoch ends (the termination table):

- sources exhausted (a bounded job's one epoch), or a stop with drain: MAX_WATERMARK,
  end_input, finish, then the final checkpoint (a savepoint for a drain, or under the
  job's ``savepoint_dir``), its commit, and FINISHED (a drain too, as Flink reports it;
  see ``run_end.ended``);
- a stop without drain: a savepoint without finish, its commit, STOPPED; a stop (or a
  savepoint) asked while an epoch runs is taken at that epoch's end (its checkpoint
  becomes the savepoint; after a stop no further epoch runs), as Flink takes either at
  the next barrier;
- otherwise: a checkpoint without finish, its commit, and the next epoch.

A bounded job takes no requests: its one epoch is its final checkpoint, which answers
a stop sent meanwhile.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
from flintlock.core.checkpoint.finished_subtasks import epoch_has_work
from flintlock.core.checkpoint.restore import RestoreSource, plan_restores
from flintlock.core.checkpoint.savepoints import as_planned
from flintlock.core.errors import GraphError, LeaseLostError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.job import run_end, run_start
from flintlock.core.job import signals as job_signals
from flintlock.core.job.control import ControlRequest
from flintlock.core.sources.epochs import EpochSplits
from flintlock.core.spark.keep_alive import HOLD_SECONDS, keep_alive_seconds, keep_workers_alive

if TYPE_CHECKING:
    from flintlock.core.job.result import JobExecutionResult
    from flintlock.core.job.run import JobRun


class TriggeredEpochs:
    """Runs a run's epochs until its input ends, a stop, or its trigger says so; a run
    without unbounded sources runs one epoch, its final checkpoint."""

    def __init__(self, run: JobRun) -> None:
        self.run = run
        self.trigger = run.trigger
        self.bounded = not run.sources

    def run_epochs(
        self, latest: CompletedCheckpoint | None, started: float, new_run: bool
    ) -> JobExecutionResult:
        """Start (fresh, from ``restore_from``, or continuing the job's last checkpoint)
        and run epochs; the result of the run when it finishes or stops."""
        run = self.run
        start = run_start.starting_point(run, latest, new_run)
        states, checkpoint_id = start.source_states, start.checkpoint_id
        run.folder.record_running(run.run_id)
        run.control.expire_requests(run.run_id)  # a new run never acts on an old request
        restores = plan_restores(start.restore, run.graph) if start.restore is not None else {}
        finished = finished_in(start.restore)  # fully finished vertices: skipped (FLIP-147)
        aborted: list[int] = []
        checkpoint: CompletedCheckpoint | None = latest
        epoch_started = time.monotonic()
        run.epoch_end_savepoint = as_planned if self.bounded else run.savepoint_at_epoch_end
        try:
            while True:
                request = None if self.bounded else run.next_request()
                planned = self._plan_sources(states)
                drain = request is not None and request.action == "stop" and request.drain
                source_ends = {uid: drain or p.exhausted for uid, p in planned.items()}
                ends = all(source_ends.values())  # the job's input ends: its final checkpoint
                has_rows = epoch_has_work(
                    run.graph, run.uids, planned, source_ends, finished, restores
                )  # a source subtask whose input ends now finishes in an epoch of its own
                if self._out_of_input(request, ends, has_rows):
                    return run_end.stopped(run, checkpoint, started, None)
                if self._skip_empty(request, ends, has_rows):
                    epoch_started = self._wait_for_next_epoch(epoch_started, 0.05)
                    continue
                savepoint = request is not None or (ends and bool(run.config.savepoint_dir))
                barrier = CheckpointBarrier(
                    checkpoint_id, "savepoint" if savepoint else "checkpoint", final=ends
                )
                root = run.savepoint_root(checkpoint_id) if savepoint else None
                plan = run.plan(barrier, restores, aborted, planned, source_ends, root)
                plan.finished_vertices = dict(finished)
                run.request_at_epoch_end = None
                try:
                    checkpoint = run.run_epoch(plan, planned)
                    if request is None and run.request_at_epoch_end is not None:
                        request = run.request_at_epoch_end  # its savepoint is this checkpoint
                except Exception as error:
                    if request is None:
                        raise
                    # a savepoint that failed before it completed fails the request (a stop
                    # too), not the job: it goes on from its last checkpoint; tasks hear of
                    # the aborted one. A commit that fails after it completed fails the job.
                    run.control.answer(request, error=f"{type(error).__name__}: {error}")
                    aborted.append(checkpoint_id)
                    checkpoint_id += 1
                    continue
                run.commit_epoch(checkpoint)
                run_end.record_epoch(run, plan, checkpoint, epoch_started)
                states = {uid: p.state for uid, p in planned.items()}
                finished = checkpoint.finished_vertices()
                savepoint_uri = run.savepoint_uri(checkpoint)
                if request is not None:
                    run.control.answer(
                        request, savepoint=savepoint_uri, checkpoint_id=checkpoint_id
                    )
                if ends or (request is not None and request.action == "stop"):
                    return run_end.ended(run, checkpoint, started, savepoint_uri, ends)
                if self.trigger.kind == "once":
                    return run_end.stopped(run, checkpoint, started, None)
                restores, aborted = run.restores_after(checkpoint), []
                checkpoint_id += 1
                epoch_started = self._wait_for_next_epoch(epoch_started)
        except Exception as failure:
            error = job_signals.as_canceled(failure)
            run_end.failed(run.master, run.run_id, error)
            if not isinstance(error, LeaseLostError):  # else the requests are not ours
                with contextlib.suppress(Exception):  # the run's own error matters more
                    run.control.answer_remaining(
                        run.run_id, error=f"{type(error).__name__}: {error}"
                    )
            if error is failure:
                raise
            raise error from failure
        finally:
            run.epoch_end_savepoint = as_planned

    def _plan_sources(self, states: dict[str, Any]) -> dict[str, EpochSplits]:
        """Each unbounded source's splits for the epoch starting now (by uid)."""
        now_ms = int(time.time() * 1000)
        planned = {}
        for name, (source, parallelism) in self.run.sources.items():
            uid = self.run.uids[name]
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
        return idle and self.trigger.kind == "available_now" and bool(self.run.epochs)

    def _skip_empty(self, request: ControlRequest | None, ends: bool, has_rows: bool) -> bool:
        """With no interval (epochs back to back), an epoch with nothing to read is not run."""
        idle = request is None and not ends and not has_rows
        return idle and self.trigger.kind == "processing_time" and not self.trigger.interval_seconds

    def _wait_for_next_epoch(self, epoch_started: float, at_least: float = 0.0) -> float:
        """Sleep until the trigger's next epoch (a request starts it at once); a long
        wait touches the Python workers before Spark stops them as idle."""
        due = epoch_started + max(self.trigger.interval_seconds, at_least)
        period, touched = keep_alive_seconds(), time.monotonic()
        while time.monotonic() < due and self.run.next_request() is None:
            now = time.monotonic()
            if period and now - touched >= period and due - now > 2 * HOLD_SECONDS:
                keep_workers_alive(self.run.master.spark, self.run.config.job_name)
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
