"""Jobs submitted with ``spark-submit --master spark://...`` to a real standalone cluster
(tests/spark_cluster.py: a master and two workers started from the pyspark wheel): they
run on the cluster's executors, and a worker JVM killed mid-epoch loses and doubles
nothing."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest
from s3_server import BUCKET, S3Server
from spark_cluster import StandaloneCluster, cluster_environment, submit_command

pytestmark = pytest.mark.slow

JOB = Path(__file__).with_name("standalone_job.py")
KEYS, ROWS = 3, 60


def submit(cluster: StandaloneCluster, base: Path | str, mode: str) -> list[str]:
    """README's spark-submit command for the job file, on the session's cluster."""
    return submit_command(cluster.url, str(JOB), str(base), mode)


def check_every_row_once(base: Path | str, filesystem: pafs.FileSystem | None = None) -> None:
    """Every id once under its key, and each key's greatest running total its ids' sum
    (a row replayed into the state would raise it), in plain Python: with two source
    subtasks the order of a key's rows is not fixed, so its running totals are not."""
    table = ds.dataset(f"{base}/out", format="parquet", filesystem=filesystem).to_table()
    rows = list(zip(*(table[name].to_pylist() for name in ("k", "id", "total")), strict=True))
    assert sorted((k, i) for k, i, _ in rows) == sorted((i % KEYS, i) for i in range(ROWS))
    for key in range(KEYS):
        totals = sorted(total for k, _, total in rows if k == key)
        assert totals[-1] == sum(range(key, ROWS, KEYS))


def result_of(output: str) -> dict[str, Any]:
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert lines, output[-4000:]
    return dict(json.loads(lines[-1].removeprefix("RESULT ")))


def test_a_submitted_job_runs_on_the_clusters_executors(
    standalone_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    done = subprocess.run(
        submit(standalone_cluster, tmp_path, "bounded"),
        capture_output=True,
        text=True,
        timeout=300,
        env=cluster_environment(standalone_cluster.folder),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
    check_every_row_once(tmp_path)
    result = result_of(done.stdout)
    where = result["where"]
    assert {(w["task"], w["subtask"]) for w in where} == {
        ("source:collection", "0"),
        ("source:collection", "1"),
        ("keyed_process -> files", "0"),
        ("keyed_process -> files", "1"),
    }
    # every subtask ran in an executor of the cluster, in a Python worker of its own
    assert all(w["id"] is not None for w in where), where
    assert {w["id"] for w in where} <= {"0", "1", "2", "3"}
    assert result["driver_pid"] not in {w["pid"] for w in where}


def ancestry(pid: int) -> list[int]:
    """``pid`` and its parents' pids up to init (Linux' /proc)."""
    chain = [pid]
    while chain[-1] > 1:
        status = Path(f"/proc/{chain[-1]}/status").read_text()
        chain.append(int(re.search(r"^PPid:\s+(\d+)", status, re.M).group(1)))  # type: ignore[union-attr]
    return chain


def test_a_worker_killed_mid_epoch_loses_and_doubles_nothing(
    standalone_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    log = tmp_path / "job.log"  # a file, not a pipe: nothing blocks the job's output
    with open(log, "w") as output:
        job = subprocess.Popen(
            submit(standalone_cluster, tmp_path, "unbounded"),
            stdout=output,
            stderr=subprocess.STDOUT,
            env=cluster_environment(standalone_cluster.folder),
        )
    victim = standalone_cluster.workers[0]
    try:
        marker = tmp_path / "marked"
        deadline = time.monotonic() + 240
        while not marker.exists() or not marker.read_text():  # the third epoch runs now
            assert job.poll() is None and time.monotonic() < deadline, log.read_text()[-6000:]
            time.sleep(0.05)
        # the worker that started the executor whose Python worker runs the marked row
        ancestors = ancestry(int(marker.read_text()))
        victim = next(w for w in standalone_cluster.workers if w.pid in ancestors)
        victim.kill()  # the worker JVM, its executor and their Python workers: SIGKILL
        assert job.wait(timeout=300) == 0, log.read_text()[-6000:]
    finally:
        if job.poll() is None:
            job.kill()
        victim.kill()  # killed already, unless the test failed before
        standalone_cluster.workers.remove(victim)
        standalone_cluster.start_worker()  # the next test finds two workers again
        standalone_cluster.wait_for_workers(2)
    output = log.read_text()
    # a task of the epoch was running on the killed executor: Spark ran it again (a
    # second attempt, "task 1.1"), on the surviving one
    assert re.search(r"Starting task \d+\.1 in stage", output), output[-6000:]
    check_every_row_once(tmp_path)
    where = result_of(output)["where"]
    last = max(w["epoch"] for w in where)
    # before the kill both executors ran subtasks; after it only the surviving one
    assert len({w["id"] for w in where if w["epoch"] <= 2}) == 2, where
    assert len({w["id"] for w in where if w["epoch"] == last}) == 1, where


def test_executors_get_the_drivers_storage_settings(
    standalone_cluster: StandaloneCluster, s3: S3Server, s3_folder: str
) -> None:
    """Checkpoints and output on S3, its credentials and endpoint only in the driver's
    environment (the workers started without them): the executors reach it too."""
    settings = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{s3.endpoint}",
    }
    worker_environment = cluster_environment(standalone_cluster.folder)
    assert not settings.keys() & worker_environment.keys()
    done = subprocess.run(
        submit(standalone_cluster, f"s3://{BUCKET}/{s3_folder}", "bounded"),
        capture_output=True,
        text=True,
        timeout=300,
        env={**worker_environment, **settings},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
    check_every_row_once(f"{BUCKET}/{s3_folder}", s3.filesystem())
    where = result_of(done.stdout)["where"]
    assert where and all(w["id"] is not None for w in where), where
    assert "testing" not in done.stdout + done.stderr  # no log shows the secret
