"""The W1 job runs over Spark Connect with the same result: only the DataFrame API is used.
On a Connect server in local mode, and on one whose master is the standalone cluster
(tests/spark_cluster.py), whose executors run the job's subtasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from job_scripts import run_script
from spark_cluster import StandaloneCluster, cluster_environment

SCRIPT = Path(__file__).with_name("connect_job.py")
N = 200_000


def expected_w1(n: int) -> tuple[int, float]:
    count, total = 0, 0.0
    for i in range(n):
        if (i * 2654435761) % 10000 % 2 == 0:
            count += 1
            total += (i % 1000) / 10.0 * 2
    return count, total


def run_connect_job(*arguments: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """connect_job.py's RESULT document."""
    return run_script(SCRIPT, *arguments, env=env)


def test_w1_over_spark_connect(tmp_path: Path) -> None:
    pytest.importorskip("grpc", reason="needs pyspark[connect] (the test extra installs it)")
    result = run_connect_job(str(tmp_path), str(N))
    assert "connect" in result["session"]
    count, total = expected_w1(N)
    for mode in ("batch", "record"):
        assert result[mode][0] == count
        assert result[mode][1] == pytest.approx(total, rel=1e-12)


def test_a_job_over_spark_connect_runs_on_the_clusters_executors(
    standalone_cluster: StandaloneCluster, connect_server: str, tmp_path: Path
) -> None:
    """The client reaches the cluster only through the Connect server (``sc://``); the
    server's driver plans the epochs and the cluster's executors run every subtask."""
    pytest.importorskip("grpc", reason="needs pyspark[connect] (the test extra installs it)")
    environment = cluster_environment(standalone_cluster.folder)
    result = run_connect_job(str(tmp_path), str(N), connect_server, env=environment)
    assert "connect" in result["session"]
    count, total = expected_w1(N)
    assert result["batch"][0] == count
    assert result["batch"][1] == pytest.approx(total, rel=1e-12)
    where = result["where"]
    assert sorted(w["subtask"] for w in where) == ["0", "1"], where
    # each subtask ran in an executor of the cluster (a local-mode server has none), in a
    # Python worker that is not the client
    assert {w["id"] for w in where} <= {"0", "1", "2", "3"}, where
    assert result["client_pid"] not in {w["pid"] for w in where}
