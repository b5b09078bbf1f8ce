"""Spark's errors of an epoch, as flintlock errors on the driver.

A failed subtask's error text carries its FailureReport (one marker line); the driver
rebuilds the LifecycleError from it and raises it without Spark's Java/Py4J chain. A
Python worker that died leaves no report: each Spark task leaves a small marker file
named by its task attempt id, which the driver reads to name the vertex and subtask.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import (
    FlintlockError,
    JobCanceled,
    LifecycleError,
    PythonTaskError,
    SparkJobError,
    WorkerCrashedError,
    WorkerImportError,
)
from flintlock.core.failure_report import FailureReport

if TYPE_CHECKING:
    from flintlock.core.plan.graph import Transformation

_TRACEBACK = "Traceback (most recent call last):"
_TID = re.compile(r"\(TID (\d+)\)")
_CANCELED = re.compile(r"Job \d+ cancelled[^\n]*")
"""Spark's words for a job canceled on the driver: its job group, a tag, all jobs,
the job itself, or a SparkContext shut down under it."""
_CRASH = re.compile(r"Python worker exited unexpectedly[^\n]*|Python worker.*?(?:crashed|killed)")


def task_markers_dir(
    storage: CheckpointStorage, job_name: str, run_id: str, checkpoint_id: int
) -> str:
    """The folder of the task markers of a run's epoch (the one of ``checkpoint_id``):
    removed once the epoch committed, beside the next epoch, whose tasks write elsewhere."""
    return f"{storage.run_dir(job_name, run_id)}/tasks/{checkpoint_id}"


def task_marker_path(
    storage: CheckpointStorage, job_name: str, run_id: str, checkpoint_id: int, attempt_id: int
) -> str:
    """Where the Spark task with attempt id ``attempt_id`` notes which subtask of the
    epoch of ``checkpoint_id`` it runs."""
    return f"{task_markers_dir(storage, job_name, run_id, checkpoint_id)}/{attempt_id}.json"


@contextlib.contextmanager
def spark_failures_as_flintlock_errors(
    storage: CheckpointStorage,
    job_name: str,
    run_id: str,
    transformations: Sequence[Transformation] = (),
    checkpoint_id: int = 0,
) -> Iterator[None]:
    """Turn Spark's exception of the epoch's action into a flintlock error, raised without
    Spark's chain (kept on ``spark_error``); a canceled Spark job is JobCanceled, and a
    module the workers cannot import is named with the operators of ``transformations``
    whose code uses it. A crashed worker's subtask is read from the task markers of the
    epoch of ``checkpoint_id``."""
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
                _crash_message(storage, job_name, run_id, checkpoint_id, text, crash.group(0)),
                error,
            ) from None
        cause = python_cause(text)
        missing = _MISSING_MODULE.search(cause or "")
        if missing is not None and _PLAN_LOAD in text:
            message = missing_module_message(job_name, run_id, missing.group(1), transformations)
            raise WorkerImportError(message, error) from None
        if cause is not None:
            raise PythonTaskError(_python_message(job_name, run_id, text, cause), error) from None
        raise SparkJobError(
            f"job '{job_name}' (run {run_id}): Spark failed: {_first_line(error)}{_log_hint()}",
            error,
        ) from None


_MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([^']+)'")
_PLAN_LOAD = "plan_from_property"
"""The frame where a task loads the job's cloudpickled plan (core/spark/task_plan.py)."""


def missing_module_message(
    job_name: str, run_id: str, module: str, transformations: Sequence[Transformation]
) -> str:
    """Which operators use ``module``, and the three ways to make it reach the workers."""
    users = operators_using(transformations, module)
    where = f"operator {', '.join(repr(u) for u in users)}" if users else "the job's code"
    top = module.split(".")[0]
    return (
        f"job '{job_name}' (run {run_id}): the Python workers cannot import module "
        f"'{module}', which {where} uses: cloudpickle sends the functions of an importable "
        f"module by reference, so each worker imports '{top}' to load the job. Make it "
        f"importable there (install it on every worker, or ship it with spark.submit.pyFiles "
        f"/ --py-files / SparkContext.addPyFile), or have cloudpickle send its code by "
        f"value: `from pyspark import cloudpickle; cloudpickle.register_pickle_by_value({top})` "
        f"before execute()"
    )


def operators_using(transformations: Sequence[Transformation], module: str) -> list[str]:
    """Names of the operators whose function, sink or their attributes come from
    ``module`` (or a submodule of it)."""
    top = module.split(".")[0]
    return [
        t.name
        for t in transformations
        if any(m == top or m.startswith(f"{top}.") for m in _modules_of(t.make_operator, t.sink))
    ]


def _modules_of(*objects: Any, depth: int = 3) -> set[str]:
    """The modules the code of ``objects`` comes from: functions, their closures and
    defaults, classes and instances with their attributes, a few levels deep."""
    found: set[str] = set()
    for obj in objects:
        if obj is None or depth == 0 or isinstance(obj, (str, bytes, int, float, bool)):
            continue
        if callable(obj) or isinstance(obj, type):
            found.add(str(getattr(obj, "__module__", "") or ""))
        else:
            found.add(type(obj).__module__)
        inner: list[Any] = [
            cell.cell_contents for cell in getattr(obj, "__closure__", None) or () if _filled(cell)
        ]
        inner += list(getattr(obj, "__defaults__", None) or ())
        if not isinstance(obj, type):
            inner += [v for v in getattr(obj, "__dict__", {}).values() if not isinstance(v, type)]
        found |= _modules_of(*inner, depth=depth - 1)
    return found


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


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
    storage: CheckpointStorage,
    job_name: str,
    run_id: str,
    checkpoint_id: int,
    text: str,
    reason: str,
) -> str:
    where = "a Python worker"
    tid = _TID.search(text)
    if tid is not None:
        marker = task_marker_path(storage, job_name, run_id, checkpoint_id, int(tid.group(1)))
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
