"""Spark's errors of an epoch, as flintlock errors on the driver.

A failed subtask's error text carries its FailureReport (one marker line); the driver
rebuilds the LifecycleError from it and raises it without Spark's Java/Py4J chain. A
Python worker that died leaves no report: each Spark task leaves a small marker file
named by its task attempt id, which the driver reads to name the vertex and subtask.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import FlintlockError, LifecycleError
from flintlock.core.failure_report import FailureReport

_TID = re.compile(r"\(TID (\d+)\)")
_CRASH = re.compile(r"Python worker exited unexpectedly[^\n]*|Python worker.*?(?:crashed|killed)")


class SparkJobError(FlintlockError):
    """The epoch's Spark job failed for a reason no flintlock task reported."""

    def __init__(self, message: str, spark_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.spark_error = spark_error


class WorkerCrashedError(SparkJobError):
    """A Python worker died (killed, segfault) while it ran a subtask; names the subtask."""


def task_markers_dir(storage: CheckpointStorage, job_name: str, run_id: str) -> str:
    """The folder of a run's task markers (emptied after every epoch's Spark job)."""
    return f"{storage.run_dir(job_name, run_id)}/tasks"


def task_marker_path(
    storage: CheckpointStorage, job_name: str, run_id: str, attempt_id: int
) -> str:
    """Where the Spark task with attempt id ``attempt_id`` notes which subtask it runs."""
    return f"{task_markers_dir(storage, job_name, run_id)}/{attempt_id}.json"


@contextlib.contextmanager
def spark_failures_as_flintlock_errors(
    storage: CheckpointStorage, job_name: str, run_id: str
) -> Iterator[None]:
    """Turn Spark's exception of the epoch's action into a flintlock error, raised without
    Spark's chain (kept on ``spark_error``)."""
    try:
        yield
    except FlintlockError:
        raise
    except Exception as error:
        text = _full_text(error)
        report = FailureReport.from_text(text)
        if report is not None:
            rebuilt = LifecycleError.from_report(report)
            rebuilt.spark_error = error  # type: ignore[attr-defined]
            raise rebuilt from None
        crash = _CRASH.search(text)
        if crash is not None:
            raise WorkerCrashedError(
                _crash_message(storage, job_name, run_id, text, crash.group(0)), error
            ) from None
        raise SparkJobError(
            f"job '{job_name}' (run {run_id}): Spark failed: {_first_line(error)}{_log_hint()}",
            error,
        ) from None


def _crash_message(
    storage: CheckpointStorage, job_name: str, run_id: str, text: str, reason: str
) -> str:
    where = "a Python worker"
    tid = _TID.search(text)
    if tid is not None:
        marker = task_marker_path(storage, job_name, run_id, int(tid.group(1)))
        try:
            task: dict[str, Any] = storage.read_json(marker)
            where = (
                f"the Python worker running task '{task['task_name']}' subtask "
                f"{task['subtask_index']}/{task['parallelism']} (attempt "
                f"{task['attempt_number']}, Spark task attempt {tid.group(1)})"
            )
        except (FlintlockError, KeyError, TypeError):
            where = f"the Python worker of Spark task attempt {tid.group(1)}"
    return f"{where} of job '{job_name}' (run {run_id}) crashed: {reason.strip()}{_log_hint()}"


def _log_hint() -> str:
    from flintlock.core.spark import session as spark_session

    log = spark_session.spark_log
    return f" (Spark's own log: {log})" if log else ""


def _full_text(error: BaseException) -> str:
    parts = [str(error)]
    java = getattr(error, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):
            parts.append(str(java))
    return "\n".join(parts)


def _first_line(error: BaseException) -> str:
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()[:500]
    return type(error).__name__
