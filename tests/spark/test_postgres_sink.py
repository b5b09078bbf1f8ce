"""PostgresSink through the scenarios every exactly-once sink passes (sink_scenarios.py),
against a real PostgreSQL server; read back with psycopg, and after each scenario no
prepared transaction of the job is left behind."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from job_scripts import run_script
from psycopg.rows import dict_row
from sink_scenarios import (
    bounded_job,
    check_exactly_once,
    one_pass,
    stop_resume_at_another_parallelism_and_drain,
)

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.sinks.postgres import PostgresSink

pytestmark = pytest.mark.slow
README = Path(__file__).resolve().parents[2] / "README.md"


def read_back(conninfo: str, table: str) -> list[dict[str, Any]]:
    with psycopg.connect(conninfo, row_factory=dict_row) as connection:
        return connection.execute(f"SELECT k, id, total FROM {table}").fetchall()


def prepared_transactions(conninfo: str) -> list[str]:
    """What the sink may leave behind: prepared transactions and staging tables."""
    with psycopg.connect(conninfo) as connection:
        left = [gid for (gid,) in connection.execute("SELECT gid FROM pg_prepared_xacts")]
        stages = "SELECT relname FROM pg_class WHERE relname LIKE '\\_flintlock\\_stage\\_%'"
        return left + [name for (name,) in connection.execute(stages)]


def test_a_bounded_job_writes_every_row_once(spark: Any, tmp_path: Path, pg_conninfo: str) -> None:
    bounded_job(spark, str(tmp_path), PostgresSink(pg_conninfo, "out"), rows=1000)
    check_exactly_once(read_back(pg_conninfo, "out"), 1000, drained=True)
    assert prepared_transactions(pg_conninfo) == []


def test_stop_resume_at_another_parallelism_and_drain(
    spark: Any, tmp_path: Path, pg_conninfo: str
) -> None:
    stop_resume_at_another_parallelism_and_drain(
        spark,
        str(tmp_path),
        lambda: PostgresSink(pg_conninfo, "out"),
        lambda: read_back(pg_conninfo, "out"),
    )
    assert prepared_transactions(pg_conninfo) == []


def test_upsert_keeps_each_keys_last_row(spark: Any, tmp_path: Path, pg_conninfo: str) -> None:
    sink = PostgresSink(pg_conninfo, "totals", write="upsert", key_columns=["k"])
    bounded_job(spark, str(tmp_path), sink, rows=500)
    rows = read_back(pg_conninfo, "totals")
    # the last row of each key is its timer row (id -1) carrying the key's total
    assert sorted((r["k"], r["id"], r["total"]) for r in rows) == [
        (k, -1, total) for k, total in sorted(one_pass(list(range(500))).items())
    ]
    assert prepared_transactions(pg_conninfo) == []


def test_a_server_with_postgresqls_default_settings_runs_the_job_exactly_once(
    spark: Any, tmp_path: Path, postgres_without_2pc: Any
) -> None:
    """max_prepared_transactions = 0, PostgreSQL's default: the sink prepares nothing."""
    conninfo = postgres_without_2pc.conninfo()
    bounded_job(spark, str(tmp_path), PostgresSink(conninfo, "out"), rows=10)
    check_exactly_once(read_back(conninfo, "out"), 10, drained=True)
    assert prepared_transactions(conninfo) == []


def test_the_readme_postgres_block_runs(
    spark: Any, pg_conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fenced "python postgres": tests/test_docs.py runs the blocks that need no server
    (block,) = re.findall(r"^```python postgres\n(.*?)^```", README.read_text(), re.S | re.M)
    monkeypatch.setenv("PG_CONNINFO", pg_conninfo)  # where the block reads its server
    namespace: dict[str, Any] = {"__name__": "readme_postgres"}
    exec(compile(block, "README.md PostgreSQL block", "exec"), namespace)
    with psycopg.connect(pg_conninfo) as connection:
        orders = connection.execute("SELECT order_id, customer, amount FROM orders").fetchall()
        last = dict(connection.execute("SELECT customer, amount FROM last_order").fetchall())
    expected = {row["order_id"]: (row["customer"], row["amount"]) for row in namespace["orders"]}
    assert sorted(orders) == sorted((i, *value) for i, value in expected.items())
    assert last == {customer: amount for customer, amount in namespace["sales"]}  # the last
    assert prepared_transactions(pg_conninfo) == []


def test_a_retried_attempt_neither_waits_on_nor_duplicates_a_dead_attempts_rows(
    tmp_path: Path, pg_conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLINTLOCK_TEST_POSTGRES", pg_conninfo)
    result = run_script(Path(__file__).with_name("postgres_retry_job.py"), tmp_path)
    assert result["markers"] == ["sink-died-after-prepare"]  # the first attempt did die
    assert result["v"] == list(range(3000))  # every row once
    assert result["prepared"] == []


def test_a_reader_sees_whole_checkpoints_only(spark: Any, tmp_path: Path, pg_conninfo: str) -> None:
    per_epoch, epochs = 250, 12
    counts: list[int] = []
    done = threading.Event()

    def poll() -> None:  # as fast as it can, while the job commits its checkpoints
        with psycopg.connect(pg_conninfo, autocommit=True) as reader:
            while not done.is_set():
                if reader.execute("SELECT to_regclass('seen')").fetchone()[0] is not None:
                    counts.append(reader.execute("SELECT count(*) FROM seen").fetchone()[0])

    env = StreamExecutionEnvironment(parallelism=3, spark=spark, checkpoint_dir=str(tmp_path))
    env.from_sequence(end=per_epoch * epochs, rows_per_epoch=per_epoch).sink_to(
        PostgresSink(pg_conninfo, "seen")
    )
    reader = threading.Thread(target=poll)
    reader.start()
    try:
        result = env.execute("whole-checkpoints", trigger=EpochTrigger.available_now())
    finally:
        done.set()
        reader.join()
    assert result.epochs == epochs
    with psycopg.connect(pg_conninfo) as connection:
        ids = [i for (i,) in connection.execute("SELECT id FROM seen ORDER BY id")]
    assert ids == list(range(per_epoch * epochs))
    partial = sorted({count for count in counts if count % per_epoch})
    assert counts and partial == [], f"{len(counts)} reads saw part of a checkpoint: {partial}"


def test_per_subtask_visibility_a_driver_killed_between_subtask_commits_is_completed_once(
    tmp_path: Path, pg_conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLINTLOCK_TEST_POSTGRES", pg_conninfo)
    script = Path(__file__).with_name("postgres_subtask_kill_job.py")
    per_epoch, epochs = 400, 4
    killed = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert killed.returncode == 9, killed.stdout[-2000:] + killed.stderr[-3000:]
    with psycopg.connect(pg_conninfo) as connection:
        seen = [i for (i,) in connection.execute("SELECT id FROM out ORDER BY id")]
        (left,) = connection.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone()
    # checkpoint 1 whole, checkpoint 2 one subtask's rows: what this visibility allows
    assert per_epoch < len(seen) < 2 * per_epoch and left == 1
    assert seen[:per_epoch] == list(range(per_epoch)) and len(set(seen)) == len(seen)
    time.sleep(1.5)  # the killed driver's lease (5 x 0.2 s) expires
    result = run_script(script, tmp_path)  # the next start on the same job
    assert result["status"] == "FINISHED"
    assert result["ids"] == list(range(per_epoch * epochs))  # every row once
    assert result["prepared"] == []
