"""IcebergSink and from_iceberg on real Spark, against a pyiceberg SQL catalog on a
SQLite file; the sink through the scenarios every exactly-once sink passes
(tests/spark/sink_scenarios.py), output read back with pyiceberg's own scan."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.exceptions import NoSuchTableError
from pyspark import cloudpickle
from sink_scenarios import (
    bounded_job,
    check_exactly_once,
    stop_resume_at_another_parallelism_and_drain,
)
from unbounded_jobs import OUT

from flintlock import CommitError, FlintlockError, SinkOutputError, StreamExecutionEnvironment
from flintlock.sinks.iceberg import IcebergSink
from flintlock.sinks.iceberg_tables import catalog_spec, load_catalog

pytestmark = pytest.mark.slow


def read_back(warehouse: str, table: str = "db.out") -> list[dict[str, Any]]:
    """The table's rows, read by pyiceberg (not by flintlock)."""
    catalog = load_catalog(catalog_spec(None, warehouse, "test"), "test")
    return catalog.load_table(table).scan().to_arrow().to_pylist()


def test_a_bounded_job_writes_every_row_once(spark: Any, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    bounded_job(spark, str(tmp_path), IcebergSink("db.out", warehouse=warehouse, schema=OUT))
    check_exactly_once(read_back(warehouse), 1000, drained=True)


def test_stop_resume_at_another_parallelism_and_drain(spark: Any, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    stop_resume_at_another_parallelism_and_drain(
        spark,
        str(tmp_path),
        lambda: IcebergSink("db.out", warehouse=warehouse, schema=OUT, mode="append"),
        lambda: read_back(warehouse),
    )
    catalog = load_catalog(catalog_spec(None, warehouse, "test"), "test")
    table = catalog.load_table("db.out")
    assert all(s.summary.get("flintlock.job-id") for s in table.snapshots())
    committed = [p for p in (tmp_path / "warehouse").rglob("*.parquet") if "/data/" in str(p)]
    assert len(committed) == len(table.inspect.files())  # no leftovers beside the table


def test_a_new_table_takes_the_streams_schema_when_the_job_knows_it(
    spark: Any, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{tmp_path}/c")
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    rows = [{"id": i, "name": f"n{i}"} for i in range(50)]
    env.from_collection(rows, schema=schema).sink_to(IcebergSink("db.out", warehouse=warehouse))
    env.execute("schema-from-the-stream")
    assert sorted(read_back(warehouse), key=lambda row: row["id"]) == rows


def test_a_job_whose_rows_do_not_fit_the_table_is_refused_before_spark_runs(
    spark: Any, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    wrong = pa.schema([("k", pa.string()), ("id", pa.int64())])
    catalog = load_catalog(catalog_spec(None, warehouse, "test"), "test")
    catalog.create_namespace("db")
    catalog.create_table("db.out", schema=wrong)
    sink = IcebergSink("db.out", warehouse=warehouse, schema=OUT, mode="append")
    with pytest.raises(SinkOutputError, match=r"column 'k' is int64, the table's is string"):
        bounded_job(spark, str(tmp_path), sink)
    assert not (tmp_path / "chk").exists() or not list((tmp_path / "chk").rglob("chk-*"))


def test_rows_that_do_not_fit_are_refused_in_the_task_before_a_file_is_written(
    spark: Any, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    catalog = load_catalog(catalog_spec(None, str(warehouse), "test"), "test")
    catalog.create_namespace("db")
    catalog.create_table("db.out", schema=pa.schema([("k", pa.int64()), ("id", pa.int64())]))
    sink = IcebergSink("db.out", warehouse=str(warehouse), mode="append")  # no schema to check
    with pytest.raises(FlintlockError) as failed:
        bounded_job(spark, str(tmp_path), sink)
    assert "column 'total' is not in the table" in str(failed.value)
    assert not list(warehouse.rglob("*.parquet"))


class DiesAfterTheIcebergCommit(IcebergSink):
    """The driver dies once between the Iceberg commit and flintlock's commit record."""

    def __init__(self, marker: str, **options: Any) -> None:
        super().__init__("db.out", **options)
        self.marker = marker

    def commit(self, context: Any, committables: list[Any]) -> None:
        super().commit(context, committables)
        if not os.path.exists(self.marker):
            Path(self.marker).write_text("died once")
            raise OSError("injected: the driver died after the Iceberg commit")


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/


def test_a_commit_interrupted_after_the_iceberg_commit_is_completed_once(
    spark: Any, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    schema = pa.schema([("v", pa.int64())])

    def run() -> Any:
        env = StreamExecutionEnvironment(
            parallelism=2, spark=spark, checkpoint_dir=str(tmp_path / "chk")
        )
        sink = DiesAfterTheIcebergCommit(
            str(tmp_path / "marker"), warehouse=warehouse, schema=schema
        )
        env.from_collection([{"v": i} for i in range(1000)], batch_size=50).sink_to(sink)
        return env.execute("interrupted")

    with pytest.raises(CommitError, match="failed to commit checkpoint 1"):
        run()
    assert len(read_back(warehouse)) == 1000  # in the table, not recorded by flintlock
    assert run().status == "FINISHED"  # the start completes the pending commit
    assert sorted(r["v"] for r in read_back(warehouse)) == list(range(1000))
    catalog = load_catalog(catalog_spec(None, warehouse, "test"), "test")
    assert len(catalog.load_table("db.out").snapshots()) == 1


SOURCE = pa.schema([("id", pa.int64()), ("name", pa.string())])


def source_table(warehouse: str) -> Any:
    """A table ``db.src`` the tests append to with pyiceberg, as another writer would."""
    catalog = load_catalog(catalog_spec(None, warehouse, "test"), "test")
    catalog.create_namespace_if_not_exists("db")
    return catalog.create_table("db.src", schema=SOURCE)


def append(table: Any, first: int, count: int) -> None:
    ids = list(range(first, first + count))
    table.append(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=SOURCE))


def test_from_iceberg_bounded_reads_one_snapshot(spark: Any, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    table = source_table(warehouse)
    append(table, 0, 50)
    append(table, 50, 50)
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{tmp_path}/chk")
    stream = env.from_iceberg("db.src", warehouse=warehouse)
    append(table, 100, 50)  # after the job was built: not in the snapshot it reads
    rows = stream.execute_and_collect("bounded-read").to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(100))
    assert all(r["name"] == f"n{r['id']}" for r in rows)


def wait_for_rows(warehouse: str, count: int, client: Any, timeout: float = 120.0) -> None:
    """Until the copy in ``db.dst`` holds ``count`` rows (read by pyiceberg)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert client.is_running(), client.result()
        try:
            if len(read_back(warehouse, "db.dst")) >= count:
                return
        except NoSuchTableError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"db.dst did not reach {count} rows in {timeout} s")


def test_from_iceberg_unbounded_stopped_and_resumed_reads_every_append_once(
    spark: Any, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    table = source_table(warehouse)
    append(table, 0, 100)

    def copy_job(parallelism: int) -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment(
            parallelism=parallelism, spark=spark, checkpoint_dir=f"{tmp_path}/chk"
        )
        stream = env.from_iceberg("db.src", warehouse=warehouse, unbounded=True)
        sink = IcebergSink("db.dst", warehouse=warehouse, schema=SOURCE, mode="append")
        stream.sink_to(sink, name="copy")
        return env

    client = copy_job(2).execute_async("copy")
    wait_for_rows(warehouse, 100, client)
    append(table, 100, 100)
    wait_for_rows(warehouse, 200, client)
    savepoint = client.stop()
    assert client.result().status == "STOPPED"
    append(table, 200, 100)  # while the job is stopped

    client = copy_job(3).execute_async("copy", restore_from=savepoint)
    wait_for_rows(warehouse, 300, client)
    append(table, 300, 100)
    wait_for_rows(warehouse, 400, client)
    client.stop()
    assert client.result().status == "STOPPED"
    ids = sorted(r["id"] for r in read_back(warehouse, "db.dst"))
    assert ids == list(range(400))


def test_the_readme_iceberg_example_writes_and_reads_the_table(spark: Any) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Apache Iceberg\n", 1)[1].split("\n##", 1)[0]
    (block,) = re.findall(r"^```python\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    namespace: dict[str, Any] = {"pa": pa, "StreamExecutionEnvironment": StreamExecutionEnvironment}
    exec(compile(block, "README.md, Apache Iceberg", "exec"), namespace)
    # read by pyiceberg, not by flintlock: the rows the block wrote, once each
    rows = read_back(namespace["warehouse"], "shop.orders")
    assert sorted((r["id"], r["amount"]) for r in rows) == [(i, 10 * i) for i in range(5)]
