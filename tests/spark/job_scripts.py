"""Spark jobs that need their own process (another master than the shared session's):
the script side starts its session, the test side runs the script and reads its result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from flintlock.core.spark.session import JAVA_OPTIONS_ENV


def start_session(master: str, settings: dict[str, str] | None = None) -> Any:
    """A quiet SparkSession on ``master`` for a job script (its process's only one), with
    ``settings`` (``spark.jars.packages``...)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.driver.extraJavaOptions", os.environ.get(JAVA_OPTIONS_ENV, ""))
    )
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def print_result(result: dict[str, Any]) -> None:
    """The script's last word: one ``RESULT`` line of JSON."""
    print("RESULT " + json.dumps(result))


def run_script(
    script: Path, *arguments: object, env: dict[str, str] | None = None, timeout: int = 600
) -> dict[str, Any]:
    """Run ``script`` with ``arguments`` in a new Python process (environment ``env``, else
    this one's); its RESULT, or fail with its output."""
    done = subprocess.run(
        [sys.executable, str(script), *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def flintlock_run(job_file: Path, source: str) -> subprocess.CompletedProcess[str]:
    """Write ``source`` to ``job_file`` and run it with ``flintlock run``, as a user would
    (its own process, its workers on this interpreter); stdout and stderr as text."""
    job_file.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "flintlock.cli", "run", str(job_file)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )


def without_java(text: str) -> str:
    """``text`` (an error as printed), checked to carry no Py4J or Java stack."""
    assert "py4j" not in text.lower() and "at org.apache" not in text, text[-3000:]
    return text
