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
from flintlock.core.job_errors import JobCanceled

_TRACEBACK = "Traceback (most recent call last):"
_TID = re.compile(r"\(TID (\d+)\)")
_CANCELED = re.compile(r"Job \d+ cancelled[^\n]*")
"""Spark's words for a job canceled on the driver: its job group, a tag, all jobs,
the job itself, or a SparkContext shut down under it."""
_CRASH = re.compile(r"Python worker exited unexpectedly[^\n]*|Python worker.*?(?:crashed|killed)")


class SparkJobError(FlintlockError):
    """The epoch's Spark job failed for a reason no flintlock task reported."""

    def __init__(self, message: str, spark_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.spark_error = spark_error


class PythonTaskError(SparkJobError):
    """Python code that is not a flintlock operator raised in a Spark task (a UDF of the
    input DataFrame, a worker that cannot import a module); the message leads with it."""


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
    Spark's chain (kept on ``spark_error``); a canceled Spark job is JobCanceled."""
    try:
        yield
    except FlintlockError:
        raise
    except Exception as error:
        text = full_text(error)
        report = FailureReport.from_text(text)
        if report is not None:
            rebuilt = LifecycleError.from_report(report)
            rebuilt.spark_error = error  # type: ignore[attr-defined]
            raise rebuilt from None
        canceled = _CANCELED.search(text)
        if canceled is not None:  # before a crash: a canceled task's worker may be killed
            raise JobCanceled(
                f"job '{job_name}' (run {run_id}) was canceled: Spark's "
                f"{canceled.group(0).strip()[:300]}"
            ) from None
        crash = _CRASH.search(text)
        if crash is not None:
            raise WorkerCrashedError(
                _crash_message(storage, job_name, run_id, text, crash.group(0)), error
            ) from None
        cause = python_cause(text)
        if cause is not None:
            raise PythonTaskError(_python_message(job_name, run_id, text, cause), error) from None
        raise SparkJobError(
            f"job '{job_name}' (run {run_id}): Spark failed: {_first_line(error)}{_log_hint()}",
            error,
        ) from None


def python_cause(text: str) -> str | None:
    """The exception line of the last Python traceback in a Spark error's text (e.g.
    ``ModuleNotFoundError: No module named 'pyarrow'``), None if it holds none."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _TRACEBACK in line]
    if not starts:
        return None
    for line in lines[starts[-1] + 1 :]:
        if line.strip() and not line.startswith((" ", "\t")):
            return line.strip()[:500]
    return None


def _user_frames(text: str, limit: int = 3) -> list[str]:
    """The last frames of the last traceback in ``text`` that are not pyspark's."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _TRACEBACK in line]
    frames: list[str] = []
    body = lines[starts[-1] + 1 :] if starts else []
    for index, line in enumerate(body):
        if line.startswith("  File ") and "pyspark" not in line and "py4j" not in line:
            frames.append(line.strip())
            following = body[index + 1] if index + 1 < len(body) else ""
            if following.startswith("    ") and not following.strip().startswith("File "):
                frames.append("  " + following.strip())
    return frames[-2 * limit :]


def _python_message(job_name: str, run_id: str, text: str, cause: str) -> str:
    lines = [
        cause,
        f"  raised by Python in a Spark task of job '{job_name}' (run {run_id}), outside "
        f"flintlock's operators: in the input DataFrame's own Python code, or while "
        f"the Python worker started",
    ]
    frames = _user_frames(text)
    if frames:
        lines.append("  where (most recent call last):")
        lines.extend("    " + frame for frame in frames)
    log = spark_log_file()
    if log:
        lines.append(f"  Spark's own log: {log}")
    return "\n".join(lines)


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
    log = spark_log_file()
    return f" (Spark's own log: {log})" if log else ""


def spark_log_file() -> str | None:
    """Where this driver's Spark logs go: the file that takes the JVM's stderr when
    flintlock started Spark, else the files of log4j's file appenders, if any."""
    from flintlock.core.spark import session as spark_session

    if spark_session.spark_log:
        return spark_session.spark_log
    with contextlib.suppress(Exception):
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        if context is not None and context._jvm is not None:
            log4j = context._jvm.org.apache.logging.log4j.LogManager
            appenders = log4j.getContext(False).getConfiguration().getAppenders().values()
            files = [a.getFileName() for a in appenders if hasattr(a, "getFileName")]
            return ", ".join(str(f) for f in files if f) or None
    return None


def full_text(error: BaseException) -> str:
    """A Spark error's message with its Java exception's, where the causes are."""
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
