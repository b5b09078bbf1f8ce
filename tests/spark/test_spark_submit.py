"""A job file run by ``spark-submit`` runs on the master spark-submit was given: flintlock
takes Spark's configuration as it is, and refuses a non-local master without
``checkpoint_dir``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark

JOB = Path(__file__).with_name("submitted_job.py")
SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"


def spark_submit(master: str, *job_args: str) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master <master> submitted_job.py <job_args>``, its driver and
    workers on this interpreter."""
    return subprocess.run(
        [str(SPARK_SUBMIT), "--master", master, str(JOB), *job_args],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        },
    )


def test_a_submitted_job_runs_on_spark_submits_master(tmp_path: Path) -> None:
    done = spark_submit("local[3]", str(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = done.stdout.splitlines()
    session = json.loads(next(line for line in lines if line.startswith("SESSION "))[8:])
    assert session["master"] == "local[3]"
    assert session["default_parallelism"] == 3
    assert session["app_name"] == JOB.name  # spark-submit's name for the application
    assert 'DONE "submitted"' in lines


def test_a_master_in_spark_defaults_conf_is_kept(tmp_path: Path) -> None:
    """Spark's own configuration (``SPARK_CONF_DIR``) names the master: a job file run by
    plain Python keeps it, as spark-submit would."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.master local[3]\n")
    done = subprocess.run(
        [sys.executable, str(JOB), str(tmp_path / "chk")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_CONF_DIR": str(conf)},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = done.stdout.splitlines()
    session = json.loads(next(line for line in lines if line.startswith("SESSION "))[8:])
    assert (session["master"], session["default_parallelism"]) == ("local[3]", 3)
    assert session["app_name"] == "submitted"  # flintlock built it: named after the job


def test_a_submitted_job_on_a_cluster_master_without_checkpoint_dir_is_refused() -> None:
    done = spark_submit("local-cluster[1,1,1024]")
    assert done.returncode != 0
    # spark-submit's PythonRunner sends the Python driver's stderr to its stdout
    assert (
        "GraphError: Spark master local-cluster[1,1,1024] is not local mode: give "
        "checkpoint_dir, storage that the driver and every executor share"
    ) in done.stdout
    assert "SESSION" not in done.stdout and "DONE" not in done.stdout
