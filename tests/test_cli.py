"""The flintlock command: plugins listing, version, job arguments, plain help, and one-line
errors instead of Py4J tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pytest

import flintlock
from flintlock.cli import flintlock_version, main
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.job.control import JobControl
from flintlock.core.job.result import JobExecutionResult

# A job that starts no Spark: it records the argv and settings `flintlock run` gave it.
RECORDING_JOB = """\
import json, os, sys
from pathlib import Path
names = ("FLINTLOCK_PARALLELISM", "FLINTLOCK_MASTER", "FLINTLOCK_NEW_RUN")
Path(__file__).with_suffix(".json").write_text(
    json.dumps({"argv": sys.argv, "env": {n: os.environ.get(n) for n in names}})
)
"""


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


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"flintlock {metadata.version('flintlock')}\n"


def test_version_without_installed_metadata_is_the_package_version() -> None:
    assert flintlock_version("flintlock-no-such-distribution") == flintlock.__version__


@pytest.mark.parametrize(
    ("options", "args", "job_args", "parallelism"),
    [
        ((), (), [], None),
        ((), ("--", "a", "--flag"), ["a", "--flag"], None),  # the old separator still works
        ((), ("a", "b"), ["a", "b"], None),
        (("--parallelism", "3"), ("a", "b", "-x", "--", "y"), ["a", "b", "-x", "--", "y"], "3"),
        ((), ("--parallelism", "3"), ["--parallelism", "3"], None),  # after the file: the job's
        (("--parallelism", "2"), ("--parallelism", "3"), ["--parallelism", "3"], "2"),
    ],
)
def test_run_passes_the_job_everything_after_its_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: tuple[str, ...],
    args: tuple[str, ...],
    job_args: list[str],
    parallelism: str | None,
) -> None:
    monkeypatch.delenv("FLINTLOCK_PARALLELISM", raising=False)
    argv_before = list(sys.argv)
    job = tmp_path / "job.py"
    job.write_text(RECORDING_JOB)
    assert main(["run", *options, str(job), *args]) == 0
    seen = json.loads(job.with_suffix(".json").read_text())
    assert seen["argv"] == [str(tmp_path / "job.py"), *job_args]
    assert seen["env"] == {
        "FLINTLOCK_PARALLELISM": parallelism,
        "FLINTLOCK_MASTER": None,
        "FLINTLOCK_NEW_RUN": None,
    }
    assert sys.argv == argv_before and "FLINTLOCK_PARALLELISM" not in os.environ


def test_run_new_run_and_master_reach_the_job_as_environment_then_are_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLINTLOCK_NEW_RUN", raising=False)
    monkeypatch.setenv("FLINTLOCK_MASTER", "local[1]")
    job = tmp_path / "job.py"
    job.write_text(RECORDING_JOB)
    assert main(["run", "--new-run", "--master", "local[3]", str(job), "x"]) == 0
    seen = json.loads(job.with_suffix(".json").read_text())
    assert seen["argv"] == [str(tmp_path / "job.py"), "x"]
    assert seen["env"]["FLINTLOCK_NEW_RUN"] == "1"
    assert seen["env"]["FLINTLOCK_MASTER"] == "local[3]"
    assert "FLINTLOCK_NEW_RUN" not in os.environ  # a later job in this process: no new run
    assert os.environ["FLINTLOCK_MASTER"] == "local[1]"


def test_an_unknown_option_before_the_job_file_says_where_job_options_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.py"
    job.write_text(RECORDING_JOB)
    with pytest.raises(SystemExit) as done:
        main(["run", "--input", "data/", str(job)])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --input" in err
    assert "the job's own after it: flintlock run [OPTIONS] JOB.py [ARG ...]" in err
    assert not job.with_suffix(".json").exists()  # the job did not run


@pytest.mark.parametrize("command", [[], ["run"], ["plugins"]])
def test_help_is_plain_text(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: flintlock {' '.join(command)}".rstrip())
    for markup in ("``", ":param", ":class:", ".. "):
        assert markup not in out


def test_run_help_documents_new_run_and_job_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    words = " ".join(capsys.readouterr().out.split())
    assert (
        "--new-run run the job again even if a finished run of it is recorded in its "
        "checkpoint directory" in words
    )
    assert "flintlock run --master spark://host:7077 job.py --input data/ --verbose" in words


def test_status_into_a_pipe_its_reader_closed_ends_quietly(tmp_path: Path) -> None:
    """`flintlock status JOB | head -3`: three lines, no BrokenPipeError traceback."""
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path)), "orders")
    folder.open()
    vertices = {f"vertex-{v:03d}-with-a-long-descriptive-name": 1_000 * v for v in range(40)}
    epoch = {"kind": "checkpoint", "seconds": 0.5, "checkpoint_bytes": 2048}
    epochs = [
        {**epoch, "epoch": n, "checkpoint_id": n, "records_in": vertices, "records_out": vertices}
        for n in range(1, 51)
    ]  # ~150 kB of status: more than the pipe holds, so the writer meets the closed pipe
    JobControl(folder).write_status({"status": "RUNNING", "epochs": epochs})
    command = [sys.executable, "-m", "flintlock.cli", "status", str(tmp_path / folder.path)]
    done = subprocess.run(
        f"{' '.join(command)} | head -3; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stderr == ""
    assert done.returncode == 141  # as `cat` killed by SIGPIPE
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("job 'orders'  NOT RUNNING")
    assert lines[2].startswith("epoch 2  chk-2 checkpoint")


def test_a_results_repr_is_one_short_line() -> None:
    """`print(result)` names the job, its end and counts, not its metrics or tables."""
    epochs = [{"epoch": n, "vertices": {"v": {"subtasks": list(range(99))}}} for n in range(40)]
    result = JobExecutionResult(
        job_name="orders",
        run_id="run-7",
        checkpoint_id=12,
        duration_seconds=3.14159,
        records_out={"source": 1_000, "sink": 1_000},
        collected={"sink": pa.table({"x": list(range(500))})},
        epochs=12,
        status="STOPPED",
        savepoint_path="/tmp/sp/savepoint-12",
        metrics={"epochs": epochs, "totals": {}},
    )
    assert repr(result) == (
        "JobExecutionResult(job='orders', STOPPED, run='run-7', chk-12, epochs=12, 3.14 s, "
        "records_out={source=1,000, sink=1,000}, savepoint='/tmp/sp/savepoint-12', "
        "collected={sink=500 rows}, metrics=40 epochs)"
    )


def test_run_from_savepoint_reaches_the_job_as_environment_and_is_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("FLINTLOCK_FROM_SAVEPOINT", raising=False)
    job = tmp_path / "job.py"
    job.write_text(
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "seen = os.environ.get('FLINTLOCK_FROM_SAVEPOINT')\n"
        "Path(__file__).with_suffix('.json').write_text(json.dumps([seen, sys.argv[1:]]))\n"
    )
    assert main(["run", "--from-savepoint", "/sp/savepoint-3-abcdef", str(job), "-s", "x"]) == 0
    assert json.loads(job.with_suffix(".json").read_text()) == [
        "/sp/savepoint-3-abcdef",
        ["-s", "x"],  # after the job file: the job's own
    ]
    assert "FLINTLOCK_FROM_SAVEPOINT" not in os.environ
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    words = " ".join(capsys.readouterr().out.split())
    assert "-s PATH, --from-savepoint PATH start the job's state from this savepoint" in words


def test_run_ui_reaches_the_job_as_its_ui_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flintlock run --ui PORT`` hands the port to every ``execute()`` of the job file
    (``FLINTLOCK_UI_PORT``), whose check reads it as ``ui_port``."""
    monkeypatch.delenv("FLINTLOCK_UI_PORT", raising=False)
    job = tmp_path / "job.py"
    job.write_text(
        "import json, os\n"
        "from pathlib import Path\n"
        "from flintlock.core.datastream.live_page import ui_port_option\n"
        "seen = [os.environ.get('FLINTLOCK_UI_PORT'), ui_port_option(None)]\n"
        "Path(__file__).with_suffix('.json').write_text(json.dumps(seen))\n"
    )
    assert main(["run", "--ui", "0", str(job)]) == 0
    assert json.loads(job.with_suffix(".json").read_text()) == ["0", 0]
    assert "FLINTLOCK_UI_PORT" not in os.environ
