"""A run's checkpoint commits beside the next epoch, as Flink commits on
``notifyCheckpointComplete`` while records flow.

When the schedule and every sink allow it (``Schedule.commits_beside_next_epoch``,
``TwoPhaseCommitSink.commits_beside_next_epoch``), a completed checkpoint's commit, the
retention of old checkpoints and the epoch's figures run on a thread of their own while
the next epoch's Spark job runs: on an object store they are most of the driver's
requests between two epochs (bench/RESULTS.md, "W4 on S3 with commits beside the next
epoch"). One commit at a time; the run waits for it before the next checkpoint
completes, so at most one completed checkpoint is ever uncommitted, as when commits run
in line, and a driver killed at any moment leaves what a restart already finishes (a
completed checkpoint's commit, a dead epoch's staged data)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from flintlock.core.job import run_end
from flintlock.core.spark.failures import task_markers_dir

if TYPE_CHECKING:
    from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
    from flintlock.core.job.run import JobRun
    from flintlock.core.job.schedules import Epoch, Schedule
    from flintlock.core.plan.execution import ExecutionPlan


class PendingCommit:
    """The commit in flight, if any: started after its checkpoint completed, waited for
    (its error raised on the run's thread) before the next one completes."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._then: Callable[[], None] | None = None

    @property
    def in_flight(self) -> bool:
        """A commit was started and not yet waited for."""
        return self._thread is not None

    def start(self, commit: Callable[[], None], then: Callable[[], None], name: str) -> None:
        """Run ``commit`` on a thread named ``name``; ``then`` runs on the waiting thread
        once ``wait`` saw the commit succeed."""
        if self._thread is not None:
            raise RuntimeError("a commit is already in flight: wait for it first")

        def run() -> None:
            try:
                commit()
            except BaseException as error:  # raised again on the run's thread
                self._error = error

        self._then = then
        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Wait for the commit in flight (none: return at once); raise its error, else
        run its ``then``."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join()
        error, self._error = self._error, None
        then, self._then = self._then, None
        if error is not None:
            raise error
        if then is not None:
            then()

    def wait_noting(self, failure: BaseException) -> None:
        """Wait as the run fails with ``failure``; the commit's own error, if any, is
        added to it as a note (the run's failure stays the one raised)."""
        try:
            self.wait()
        except BaseException as error:
            if hasattr(failure, "add_note"):  # Python 3.11+; 3.10 keeps the failure as is
                failure.add_note(
                    f"the commit running beside the failed epoch failed too: "
                    f"{type(error).__name__}: {error}"
                )


def commits_beside(run: JobRun, schedule: Schedule) -> bool:
    """Whether the next epoch may run while this one's checkpoint commits: the schedule
    and every sink of the run allow it."""
    sinks = run.sinks.values()
    return schedule.commits_beside_next_epoch and all(
        sink.commits_beside_next_epoch for sink in sinks
    )


def beside_next_epoch(
    run: JobRun,
    schedule: Schedule,
    epoch: Epoch,
    plan: ExecutionPlan,
    checkpoint: CompletedCheckpoint,
    started: float,
) -> None:
    """Start ``checkpoint``'s commit, to run while the next epoch does: what dead
    attempts staged goes first (no task stages between two epochs); the commit,
    retention and the epoch's figures on the commit's thread; the sources and the
    schedule hear of it once the run waited for it."""
    run.abort_uncommitted(checkpoint.committables)

    figures: list[dict[str, Any]] = []

    def commit() -> None:
        run.coordinator.commit(checkpoint, run.sinks)
        figures.append(after_commit(run, plan, checkpoint, started, abort=False))

    def then() -> None:
        notify_sources(run, checkpoint)
        run_end.show_progress(run, figures[0])
        schedule.epoch_done(epoch)

    run.pending_commit.start(commit, then, f"flintlock-commit-chk-{checkpoint.checkpoint_id}")


def after_commit(
    run: JobRun,
    plan: ExecutionPlan,
    checkpoint: CompletedCheckpoint,
    started: float,
    *,
    abort: bool,
) -> dict[str, Any]:
    """What follows a checkpoint's commit, side by side (each step is a few requests on
    an object store, none needs another's): the epoch's figures recorded, its task
    markers gone, what its dead attempts staged if ``abort``, retention. The first error
    raises, once every step ended; else the epoch's figures (for ``show_progress``)."""
    steps: list[Callable[[], Any]] = [
        partial(run_end.record_epoch, run, plan, checkpoint, started),
        partial(drop_task_markers, run, checkpoint),
        partial(retain_and_collect, run),
    ]
    if abort:
        steps.append(partial(run.abort_uncommitted, checkpoint.committables))
    with ThreadPoolExecutor(len(steps), thread_name_prefix="flintlock-after-commit") as pool:
        done = [pool.submit(step) for step in steps]
    results = [step.result() for step in done]
    figures: dict[str, Any] = results[0]
    return figures


def drop_task_markers(run: JobRun, checkpoint: CompletedCheckpoint) -> None:
    """The markers of the checkpoint's epoch go: they name a crashed worker's subtask,
    of no use once the epoch's checkpoint committed (each epoch's tasks write their own
    folder, so this never races with the next epoch's)."""
    markers = task_markers_dir(
        run.storage, run.config.job_name, run.run_id, checkpoint.checkpoint_id
    )
    run.storage.delete_dir(markers)


def notify_sources(run: JobRun, checkpoint: CompletedCheckpoint) -> None:
    """The run's source enumerators hear that ``checkpoint`` is committed."""
    for name, (source, _) in run.sources.items():
        if run.uids[name] in checkpoint.sources:
            source.notify_checkpoint_complete(
                checkpoint.checkpoint_id, checkpoint.sources[run.uids[name]]
            )


def retain_and_collect(run: JobRun) -> None:
    """After a commit: old checkpoints go; a collect sink's committed rows are kept."""
    run.coordinator.retain(run.config.retained_checkpoints)
    for name, sink in run.sinks.items():  # a collect sink holds this epoch's rows
        table = getattr(sink, "result", None)
        path = getattr(sink, "result_path", None)
        if table is not None and path is not None:
            run.collected.setdefault(name, []).append(table)
            run.collected_paths.setdefault(name, []).append(path)
