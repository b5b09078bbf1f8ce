"""Before the first job over a session flintlock did not start: one tiny Spark task that
imports flintlock's dependencies on a worker, so that a worker Python without them is
refused with the setting to fix, not met as a failed task deep inside the job."""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any

from flintlock.core.errors import SparkSetupError
from flintlock.core.spark.failures import full_text, python_cause

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NEEDED = ("pyarrow", "cloudpickle", "greenlet", "pluggy", "mmh3", "numpy", "flintlock")
"""What a flintlock task imports on a worker."""

_NOT_STARTED = re.compile(r'Cannot run program "[^"]*"[^\n]*')
"""The JVM's words when the worker Python does not exist or cannot run."""

_probed: set[tuple[str, str]] = set()
"""(Spark application, worker Python) pairs whose workers were found fit."""


def _probe(_: int) -> str:
    """Runs on a worker (shipped by value: it needs nothing but the standard library)."""
    import importlib
    import json
    import platform
    import sys

    missing = {}
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except Exception as error:
            missing[name] = f"{type(error).__name__}: {error}"
    found = {"python": sys.executable, "version": platform.python_version()}
    return json.dumps({**found, "missing": missing})


def check_workers(spark: SparkSession) -> None:
    """Refuse a session whose worker Python lacks flintlock or its dependencies; runs
    one one-row task per SparkContext and worker Python, remembered for the next jobs."""
    key = _session_key(spark)
    if key in _probed:
        return
    from pyspark import cloudpickle
    from pyspark.sql import functions

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers may lack flintlock
    probe = functions.udf(_probe, "string", useArrow=False)
    try:
        rows = spark.range(1, numPartitions=1).select(probe("id").alias("report")).collect()
        report: dict[str, Any] = json.loads(rows[0]["report"])
    except Exception as error:
        raise SparkSetupError(_refusal(key[1], f"no worker ran: {_why(error)}")) from None
    missing: dict[str, str] = report["missing"]
    if missing:
        first = next(iter(missing.values()))
        where = f"{report['python']} (Python {report['version']})"
        problem = f"it cannot import {', '.join(missing)} ({first})"
        raise SparkSetupError(_refusal(where, problem))
    _probed.add(key)


def _why(error: BaseException) -> str:
    """The Python cause, or the JVM's reason a worker did not start, in one line."""
    text = full_text(error)
    not_started = _NOT_STARTED.search(text)
    found = python_cause(text) or (not_started.group(0) if not_started else None)
    return (found or text.strip().splitlines()[0])[:300]


def _session_key(spark: SparkSession) -> tuple[str, str]:
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect has no SparkContext here
        return f"connect-{id(spark)}", "the Spark Connect server's worker Python"
    application = getattr(context, "_flintlock_application_id", None)
    if application is None:  # asked once per SparkContext (two py4j calls)
        application = context._flintlock_application_id = str(context.applicationId)  # type: ignore[attr-defined]
    return application, str(context.pythonExec)  # a Python attribute, set by the user


def _refusal(worker: str, problem: str) -> str:
    return (
        f"Spark's Python workers cannot run flintlock: the worker Python {worker}: "
        f"{problem}. Point the workers at a Python that has flintlock installed, e.g. this "
        f"driver's {sys.executable}: set PYSPARK_PYTHON (or spark.pyspark.python with "
        f"spark-submit) before the SparkContext starts, or install flintlock there"
    )
