"""Which SparkSession a job uses, and that flintlock stops only a session it started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flintlock import StreamExecutionEnvironment
from flintlock.core.spark.session import JAVA_OPTIONS_ENV, driver_java_options
from flintlock.errors import SparkSetupError


def test_the_active_session_is_used_and_left_running(spark: Any) -> None:
    env = StreamExecutionEnvironment(parallelism=2)  # no session given: the active one
    table = env.from_collection([{"v": i} for i in range(10)]).execute_and_collect("active")
    assert sorted(table.column("v").to_pylist()) == list(range(10))
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession() is spark
    assert spark.range(3).count() == 3  # not stopped


def test_another_master_than_the_active_sessions_is_an_error(spark: Any) -> None:
    env = StreamExecutionEnvironment(parallelism=1, master="local[1]")
    env.from_collection([{"v": 1}]).print()
    with pytest.raises(SparkSetupError, match=r"already active and cannot move to local\[1\]"):
        env.execute("other-master")
    assert spark.range(3).count() == 3


def test_an_embedded_session_is_started_and_stopped(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "from pyspark.sql import SparkSession\n"
        "from flintlock import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment(parallelism=2)\n"
        "rows = env.from_collection([{'v': i} for i in range(5)])\n"
        "table = rows.execute_and_collect('embedded')\n"
        "print('ROWS', sorted(table.column('v').to_pylist()))\n"
        "print('ACTIVE AFTER', SparkSession.getActiveSession())\n"
        "env.from_collection([{'v': 1}]).print()\n"
        "app = lambda _: print('APP', SparkSession.getActiveSession().sparkContext.appName)\n"
        "env.execute('named-job', progress=app)\n"
    )
    done = subprocess.run(
        [sys.executable, str(job)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS [0, 1, 2, 3, 4]" in done.stdout
    assert "ACTIVE AFTER None" in done.stdout
    assert "APP named-job" in done.stdout  # the application is named after the job


def test_the_embedded_sessions_driver_gets_the_users_java_options_after_the_quiet_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(JAVA_OPTIONS_ENV, " -XX:TieredStopAtLevel=1 -Dmarker=1 ")
    options = driver_java_options().split()
    assert options[0].startswith("-Dlog4j2.configurationFile=file:")
    assert options[1:] == ["-XX:TieredStopAtLevel=1", "-Dmarker=1"]
    monkeypatch.delenv(JAVA_OPTIONS_ENV)
    assert driver_java_options().split() == options[:1]


def test_the_test_suites_jvm_runs_with_the_test_java_options(spark: Any) -> None:
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in arguments, arguments
