"""Async I/O on Spark against a real HTTP server the test starts (each answer takes
20 ms): an unbounded job whose lookups are still in flight at its checkpoints, stopped
with a savepoint and resumed at another parallelism; and one whose driver is killed
mid-epoch (calls in flight) after a killed task. Every row once in the output, the rows
in flight at a checkpoint or a failure called again (the server sees them twice)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import async_lookup_job
import pyarrow.parquet as pq
import pytest
import unbounded_jobs
from async_lookup_job import PER_EPOCH, PriceServer, build, price
from job_scripts import run_script
from pyspark import cloudpickle
from unbounded_jobs import wait_for_epochs

cloudpickle.register_pickle_by_value(unbounded_jobs)
cloudpickle.register_pickle_by_value(async_lookup_job)

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).with_name("async_lookup_job.py")


@pytest.fixture
def price_server() -> Iterator[PriceServer]:
    server = PriceServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def check_each_row_once(base: Path, server: PriceServer, count: int) -> None:
    """The output holds ids 0..count-1 once each with the server's price; the server was
    asked for each, and for some twice (calls in flight at a checkpoint or a failure)."""
    rows = pq.read_table(base / "out").to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(count))
    assert all(r["cents"] == price(r["id"]) for r in rows)
    assert set(server.requests) >= set(range(count))
    called_again = [i for i, n in server.requests.items() if n > 1]
    assert called_again, "no lookup was in flight at a checkpoint: the test proves nothing"


def test_lookups_in_flight_at_checkpoints_and_a_savepoint_are_called_again_once_emitted(
    spark: Any, tmp_path: Path, price_server: PriceServer
) -> None:
    port = price_server.port
    client = build(spark, tmp_path, port, parallelism=2).execute_async("prices")
    wait_for_epochs(client, 3)
    savepoint = client.stop()
    stopped = client.result()
    assert stopped.status == "STOPPED"

    resumed = build(spark, tmp_path, port, parallelism=1)
    client = resumed.execute_async("prices", restore_from=savepoint)
    wait_for_epochs(client, 2, after_run=stopped.run_id)
    client.stop(drain=True)
    drained = client.result()
    assert drained.status == "FINISHED"

    check_each_row_once(tmp_path, price_server, PER_EPOCH * (stopped.epochs + drained.epochs))


def test_a_driver_killed_mid_epoch_and_a_killed_task_lose_and_repeat_no_row(
    tmp_path: Path, price_server: PriceServer
) -> None:
    port, end = price_server.port, 5 * PER_EPOCH
    faults = ["--kill-task-at", "100", "--kill-driver-at", str(2 * PER_EPOCH + 50)]
    killed = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), str(port), str(end), *faults],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-3000:]
    assert (tmp_path / "task").exists() and (tmp_path / "driver").exists()  # both fired
    assert run_script(SCRIPT, tmp_path, port, end)["status"] == "FINISHED"
    check_each_row_once(tmp_path, price_server, end)
