"""Table to table, exactly once end to end (issue 21): a Delta table written by flintlock
is read incrementally by ``from_delta`` in a second job that writes to PostgreSQL; that
job's driver is killed inside a commit and started again, and the database holds each row
once (read with SQL, the Delta table with deltalake's own reader)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
import table_pipeline_job
from delta_tables import read_delta
from pyspark import cloudpickle

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.sinks.delta import DeltaSink

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(table_pipeline_job)  # workers cannot import tests/


def write_orders(spark: Any, base: str, ids: range) -> None:
    """The first job: orders ``ids`` appended to the Delta table by a flintlock job."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    rows = [{"id": i, "amount": i % 97} for i in ids]
    env.from_collection(rows, batch_size=100).sink_to(
        DeltaSink(f"{base}/orders", mode="append"), name="orders"
    )
    assert env.execute(f"write-orders-{ids.start}").status == "FINISHED"


def test_delta_to_postgres_killed_in_a_commit_holds_each_row_once(
    spark: Any, tmp_path: Path, pg_conninfo: str
) -> None:
    base = str(tmp_path)
    write_orders(spark, base, range(0, 600))
    script = Path(__file__).with_name("table_pipeline_job.py")
    environment = {**os.environ, "FLINTLOCK_TEST_POSTGRES": pg_conninfo}
    done = subprocess.run(
        [sys.executable, str(script), base],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=script.parent,
        env=environment,
    )
    assert done.returncode == -9, done.stdout[-2000:] + done.stderr[-3000:]
    assert Path(base, "killed").read_text() == "killed in the commit of checkpoint 1"
    with psycopg.connect(pg_conninfo) as connection:  # half of checkpoint 1 is in
        half = connection.execute("SELECT count(*) FROM copied").fetchone()[0]
    assert 0 < half < 600

    write_orders(spark, base, range(600, 1000))  # more orders while the copy is down
    env = table_pipeline_job.copy_job(spark, base, pg_conninfo)
    result = env.execute("copy-orders", trigger=EpochTrigger.available_now())
    assert result.status == "STOPPED"  # caught up: the table may grow, a next run goes on

    source = read_delta(f"{base}/orders").to_pylist()  # deltalake's reader, not flintlock's
    assert [row["id"] for row in source] == list(range(1000))
    with psycopg.connect(pg_conninfo) as connection:
        copied = connection.execute("SELECT id, amount FROM copied ORDER BY id").fetchall()
        prepared = connection.execute("SELECT gid FROM pg_prepared_xacts").fetchall()
    assert copied == [(row["id"], row["amount"]) for row in source]  # each row once
    assert prepared == []
