"""A job on local-cluster Spark: separate executor JVMs and Python workers, not local mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from job_scripts import run_script

SCRIPT = Path(__file__).with_name("cluster_job.py")


@pytest.fixture(scope="module")
def on_cluster(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    base = tmp_path_factory.mktemp("cluster")
    return run_script(SCRIPT, base)


def test_outside_local_mode_a_checkpoint_dir_is_required(on_cluster: dict) -> None:
    assert on_cluster["missing_dir_error"] == (
        "Spark master local-cluster[2,1,1024] is not local mode: give checkpoint_dir, "
        "storage that the driver and every executor share"
    )


def test_a_keyed_job_runs_on_executors_exactly_once(on_cluster: dict) -> None:
    expected = sorted((f"u{k}", sum(range(k, 500, 5))) for k in range(5))
    assert [tuple(pair) for pair in on_cluster["totals"]] == expected
    assert on_cluster["driver_pid"] not in on_cluster["worker_pids"]
    assert on_cluster["checkpoint"] == 1


def test_plugin_recordings_come_back_from_every_executor_subtask(on_cluster: dict) -> None:
    assert on_cluster["final_states"] == {
        "source:collection#0": "FINISHED",
        "source:collection#1": "FINISHED",
        "keyed_process -> sink:files#0": "FINISHED",
        "keyed_process -> sink:files#1": "FINISHED",
    }
