"""What a run records as it goes and how it ends: each epoch's figures (the status file,
the run log, the metrics, the progress callback), and its end, FINISHED or STOPPED with
its result, or FAILED / CANCELED with its error, in the job's result store."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
from flintlock.core.errors import JobCanceled, LeaseLostError
from flintlock.core.job import signals as job_signals
from flintlock.core.job.run_log import record_failure
from flintlock.core.metrics.aggregate import watermarks
from flintlock.core.plan.execution import ExecutionPlan

if TYPE_CHECKING:
    from flintlock.core.job.master import JobMaster
    from flintlock.core.job.result import JobExecutionResult
    from flintlock.core.job.run import JobRun

EPOCH_KEYS = ("epoch", "checkpoint_id", "kind", "final", "seconds", "time")
"""The epoch's figures its metrics document starts with."""


def record_epoch(
    run: JobRun, plan: ExecutionPlan, checkpoint: CompletedCheckpoint, epoch_started: float
) -> dict[str, Any]:
    """The committed epoch's figures, recorded: the run's totals, its metrics, the run
    log, the status file. The progress callback gets them on the run's thread
    (``show_progress``): a user's callback may ask Spark about its thread."""
    records: dict[str, int] = {}
    records_in: dict[str, int] = {}
    size = 0
    for ack in checkpoint.acknowledgements:
        name = ack.task_name
        records[name] = records.get(name, 0) + ack.records_out
        records_in[name] = records_in.get(name, 0) + ack.records_in
        size += ack.size_bytes
    for name, count in records.items():
        run.records_out[name] = run.records_out.get(name, 0) + count
    figures: dict[str, Any] = {
        "epoch": len(run.epochs) + 1,
        "checkpoint_id": checkpoint.checkpoint_id,
        "kind": plan.barrier.kind,
        "final": plan.barrier.final,
        "seconds": round(time.monotonic() - epoch_started, 4),
        "records_in": records_in,
        "records_out": records,
        "checkpoint_bytes": size,
        "time": time.time(),
        "commits": dict(checkpoint.commit_seconds),  # sink -> seconds, if committed here
    }
    spark = run.settings.spark_jobs.pop(checkpoint.checkpoint_id, None)
    if spark is not None:  # where Spark's UI shows the epoch
        figures["spark"] = spark
    metrics = run.metrics.record(checkpoint.acknowledgements, {k: figures[k] for k in EPOCH_KEYS})
    figures["watermarks"] = watermarks(metrics) if metrics else dict.fromkeys(records)
    run.epochs.append(figures)
    run.run_log.record_epoch(plan, checkpoint, figures)
    write_status(run, "RUNNING", checkpoint.checkpoint_id)
    return figures


def show_progress(run: JobRun, figures: dict[str, Any]) -> None:
    """The progress callback, on the run's thread (where Spark's active session and the
    epoch's job description are), with an epoch's figures."""
    if run.progress is not None:
        run.progress(figures)


def write_status(run: JobRun, status: str, checkpoint_id: int, **extra: Any) -> None:
    """The run's status file (``flintlock status``): status, trigger, epochs so far; a
    bounded job's one epoch has none (its result store says it all)."""
    if not run.takes_requests:
        return
    run.control.write_status(
        {
            "job_name": run.folder.job_name,
            "job_id": run.folder.job_id,
            "run_id": run.run_id,
            "status": status,
            "trigger": {"kind": run.trigger.kind, "seconds": run.trigger.interval_seconds},
            "latest_checkpoint": checkpoint_id,
            "epochs": run.epochs,
            **extra,
        }
    )


def ended(
    run: JobRun,
    checkpoint: CompletedCheckpoint,
    started: float,
    savepoint: str | None,
    input_ended: bool,
) -> JobExecutionResult:
    """The input ended (FINISHED) or a stop took a savepoint (STOPPED).

    A stop with drain ends the input, so it is FINISHED too (its savepoint kept), as
    Flink reports it: its stop-with-savepoint, drained or not, succeeds only once every
    task reached FINISHED, and the job then ends FINISHED (apache/flink,
    flink-runtime/.../stopwithsavepoint/StopWithSavepointTerminationHandlerImpl.java,
    ``handleExecutionsTermination``). A stop without drain stays STOPPED here: its
    next start continues the job, where Flink would need a new submission."""
    if not input_ended:
        return stopped(run, checkpoint, started, savepoint)
    results = run.results
    result = results.of(checkpoint, started, run.records_out)
    result.savepoint_path = savepoint
    run.folder.record_finished(
        run.run_id, checkpoint.checkpoint_id, results.document(result, run.collected_paths)
    )
    write_status(run, "FINISHED", checkpoint.checkpoint_id, savepoint=savepoint)
    final = savepoint or run.checkpoint_uri(checkpoint.checkpoint_id)
    run.control.answer_remaining(
        run.run_id, savepoint=final, checkpoint_id=checkpoint.checkpoint_id, final=True
    )
    return _with_run_figures(run, result, "FINISHED")


def stopped(
    run: JobRun, checkpoint: CompletedCheckpoint | None, started: float, savepoint: str | None
) -> JobExecutionResult:
    """STOPPED: the next start continues from ``checkpoint`` (the savepoint, if any)."""
    results = run.results
    checkpoint_id = checkpoint.checkpoint_id if checkpoint is not None else 0
    result = results.of(checkpoint, started, run.records_out)
    run.folder.record_stopped(
        run.run_id, checkpoint_id, savepoint, results.document(result, run.collected_paths)
    )
    write_status(run, "STOPPED", checkpoint_id, savepoint=savepoint)
    stopped_at = savepoint or run.checkpoint_uri(checkpoint_id)
    run.control.answer_remaining(run.run_id, savepoint=stopped_at, checkpoint_id=checkpoint_id)
    result.savepoint_path = savepoint
    return _with_run_figures(run, result, "STOPPED")


def failed_run(run: JobRun, failure: Exception) -> Exception:
    """A run's failure (JobCanceled if the job was canceled meanwhile), recorded, and
    every request still waiting answered with it; the error to raise."""
    error = job_signals.as_canceled(failure)
    failed(run.master, run.run_id, error)
    if not isinstance(error, LeaseLostError):  # else the requests are not ours
        with contextlib.suppress(Exception):  # the run's own error matters more
            run.control.answer_remaining(run.run_id, error=f"{type(error).__name__}: {error}")
    return error


def failed(master: JobMaster, run_id: str, error: Exception) -> None:
    """Record FAILED (CANCELED for a canceled run; nothing once the lease is lost: the
    result store belongs to the driver that took it); if even that fails, say so on the
    error being raised."""
    if isinstance(error, LeaseLostError):
        return
    try:
        if isinstance(error, JobCanceled):
            latest = master.coordinator.latest()
            at = latest.checkpoint_id if latest is not None else None
            master.folder.record_canceled(run_id, at)
        else:
            master.folder.record_failed(run_id, error)
            record_failure(master.folder, run_id, error)  # for the run report
    except Exception as recording:  # the job's own error matters more
        if hasattr(error, "add_note"):
            error.add_note(f"(the job's FAILED result could not be recorded: {recording})")


def _with_run_figures(run: JobRun, result: JobExecutionResult, status: str) -> JobExecutionResult:
    """The run's figures: status, epochs, and every epoch's collected rows."""
    result.status = status
    result.epochs = len(run.epochs)
    result.metrics = run.metrics.summary()
    result.collected = {
        name: pa.concat_tables(tables, promote_options="permissive")
        for name, tables in run.collected.items()
    }
    for name, table in result.collected.items():  # a collect handle's table(): the run's rows
        sink = run.sinks.get(name)
        if sink is not None and hasattr(sink, "result"):
            sink.result = table
    return result
