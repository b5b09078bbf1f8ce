"""The flintlock command: plugins listing, and one-line errors instead of Py4J tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flintlock.cli import main


def test_plugins_lists_every_kind_with_its_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    for line in ("task types:", "state backends:", "operators:", "sinks:"):
        assert line in out
    assert any(line.split()[:2] == ["keyed_process", "flintlock"] for line in out.splitlines())
    assert any(line.split()[:2] == ["files", "flintlock"] for line in out.splitlines())


def test_run_without_java_says_what_to_install(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "from flintlock import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment(parallelism=1)\n"
        "env.from_collection([{'v': 1}]).print()\n"
        "env.execute('no-java')\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    environment = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    environment["PATH"] = str(bin_dir)  # no java on it
    done = subprocess.run(
        [sys.executable, "-m", "flintlock.cli", "run", str(job)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "flintlock: error: Spark needs Java 17+ and none was found: install one (e.g. "
        "'apt-get install openjdk-17-jre-headless') or set JAVA_HOME"
    ]


def test_run_with_a_worker_python_without_pyarrow_says_so_in_one_line(tmp_path: Path) -> None:
    bare = tmp_path / "bare-venv"  # a real interpreter with nothing installed
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    job = tmp_path / "job.py"
    job.write_text(
        "from flintlock import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment(parallelism=1)\n"
        "env.from_collection([{'v': 1}]).print()\n"
        "env.execute('bare-worker')\n"
    )
    worker = str(bare / "bin" / "python")
    done = subprocess.run(
        [sys.executable, "-m", "flintlock.cli", "run", str(job)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYSPARK_PYTHON": worker},
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"flintlock: error: the worker Python PYSPARK_PYTHON={worker} cannot import pyarrow "
        f"and flintlock: install them there, or unset PYSPARK_PYTHON to use {sys.executable}"
    ]


def test_run_of_a_missing_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no/such/job.py"]) == 2
    assert capsys.readouterr().err == "flintlock: error: no job file at no/such/job.py\n"
