"""DeltaSink and the delta source on Spark: the scenarios every exactly-once sink passes
(tests/spark/sink_scenarios.py), and table-to-table reading, read back with deltalake."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from delta_tables import read_delta
from deltalake import DeltaTable, write_deltalake
from job_scripts import run_script
from sink_scenarios import (
    bounded_job,
    check_exactly_once,
    stop_resume_at_another_parallelism_and_drain,
)

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.sinks.delta import DeltaSink

pytestmark = pytest.mark.slow


def rows_of(uri: str) -> list[dict[str, Any]]:
    """The table's rows, read by deltalake."""
    return read_delta(uri).to_pylist()


def test_a_bounded_job_writes_every_row_once(spark: Any, tmp_path: Path) -> None:
    uri = f"{tmp_path}/table"
    bounded_job(spark, str(tmp_path), DeltaSink(uri, partition_by=["k"]), rows=1000)
    check_exactly_once(rows_of(uri), 1000, drained=True)
    assert DeltaTable(uri).version() == 0  # one commit: the final checkpoint's


def test_stop_resume_at_another_parallelism_and_drain(spark: Any, tmp_path: Path) -> None:
    uri = f"{tmp_path}/table"
    stop_resume_at_another_parallelism_and_drain(
        spark, str(tmp_path), lambda: DeltaSink(uri, mode="append"), lambda: rows_of(uri)
    )
    table = DeltaTable(uri)
    versions = [c.get("flintlock.checkpoint_id") for c in table.history()]
    assert len(versions) == len(set(versions)) == table.version() + 1  # one per checkpoint


def ids_of(uri: str) -> list[int]:
    return read_delta(uri).column("id").to_pylist()


def source_rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "part": [i % 3 for i in ids]})


def copy_job(spark: Any, base: str, parallelism: int, **source: Any) -> StreamExecutionEnvironment:
    """A table-to-table job: the delta source into a DeltaSink."""
    env = StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=f"{base}/chk"
    )
    env.from_delta(f"{base}/source", **source).sink_to(
        DeltaSink(f"{base}/copy", mode="append"), name="copy"
    )
    return env


def test_from_delta_bounded_copies_one_version(spark: Any, tmp_path: Path) -> None:
    base = str(tmp_path)
    write_deltalake(f"{base}/source", source_rows(range(500)), partition_by=["part"])
    write_deltalake(f"{base}/source", source_rows(range(500, 700)), mode="append")
    result = copy_job(spark, base, 2, version=0).execute("copy")
    assert result.status == "FINISHED"
    assert ids_of(f"{base}/copy") == list(range(500))
    copied = read_delta(f"{base}/copy")
    assert copied.equals(read_delta(f"{base}/source", version=0))


def wait_for_rows(uri: str, count: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if DeltaTable.is_deltatable(uri) and len(ids_of(uri)) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{uri} did not reach {count} rows in {timeout} s")


def test_from_delta_unbounded_reads_appends_once_across_a_savepoint(
    spark: Any, tmp_path: Path
) -> None:
    base, source = str(tmp_path), f"{tmp_path}/source"
    write_deltalake(source, source_rows(range(100)), partition_by=["part"])
    client = copy_job(spark, base, 2, unbounded=True).execute_async("copy")
    wait_for_rows(f"{base}/copy", 100)
    for first in (100, 200):  # appended while the job runs, between its epochs
        write_deltalake(source, source_rows(range(first, first + 100)), mode="append")
        wait_for_rows(f"{base}/copy", first + 100)
    savepoint = client.stop()
    assert client.result().status == "STOPPED"
    write_deltalake(source, source_rows(range(300, 400)), mode="append")  # while stopped
    client = copy_job(spark, base, 3, unbounded=True).execute_async("copy", restore_from=savepoint)
    wait_for_rows(f"{base}/copy", 400)
    write_deltalake(source, source_rows(range(400, 450)), mode="append")
    wait_for_rows(f"{base}/copy", 450)
    client.stop(drain=True)
    assert client.result().status == "FINISHED"  # a drain ends the input
    assert ids_of(f"{base}/copy") == list(range(450))


def test_a_task_attempt_that_died_after_writing_leaves_no_rows_and_no_files(
    tmp_path: Path,
) -> None:
    result = run_script(Path(__file__).with_name("delta_retry_job.py"), tmp_path)
    assert result["markers"] == ["delta-writer-died"]  # the first attempt really died
    assert result["v"] == list(range(3000))  # every row once
    assert result["on_disk"] == result["in_table"]  # the dead attempt's files removed


def test_available_now_runs_of_from_delta_copy_what_was_appended_since_the_last(
    spark: Any, tmp_path: Path
) -> None:
    base, source = str(tmp_path), f"{tmp_path}/source"
    write_deltalake(source, source_rows(range(100)))
    once = EpochTrigger.available_now()
    assert copy_job(spark, base, 2, unbounded=True).execute("copy", trigger=once).epochs >= 1
    assert ids_of(f"{base}/copy") == list(range(100))
    write_deltalake(source, source_rows(range(100, 130)), mode="append")
    write_deltalake(source, source_rows(range(130, 150)), mode="append")
    copy_job(spark, base, 2, unbounded=True).execute("copy", trigger=once)  # continues
    assert ids_of(f"{base}/copy") == list(range(150))
