"""Local jobs without a checkpoint directory leave nothing behind (unless asked to), and a
start that only completes a pending commit also cleans what dead attempts left."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import FlintlockError, StreamExecutionEnvironment


def fail_on_seven(row: dict[str, Any]) -> dict[str, Any]:
    if row["v"] == 7:
        raise ValueError("seven")
    return row


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tempfile's folder, for this test only: what a job's temporary checkpoints leave."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def leftovers(root: Path) -> list[Path]:
    return sorted(root.glob("flintlock-checkpoints-*"))


def test_a_temporary_checkpoint_dir_is_removed_after_success(spark: Any, temp_root: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    table = env.from_collection([{"v": i} for i in range(10)]).collect()
    assert sorted(table.column("v").to_pylist()) == list(range(10))  # read before removal
    assert leftovers(temp_root) == []


def test_a_temporary_checkpoint_dir_is_removed_after_failure(spark: Any, temp_root: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    env.from_collection([{"v": i} for i in range(10)]).map(fail_on_seven).print()
    with pytest.raises(FlintlockError, match="seven"):
        env.execute("fails")
    assert leftovers(temp_root) == []


def test_a_temporary_checkpoint_dir_is_kept_when_asked(spark: Any, temp_root: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, keep_temporary_checkpoints=True)
    env.from_collection([{"v": 1}]).collect(job_name="kept")
    [kept] = leftovers(temp_root)
    assert (kept / "kept" / "_result.json").exists()


def test_a_collect_of_no_rows_keeps_the_streams_schema(spark: Any) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    rows = [{"v": 1, "name": "a"}, {"v": 2, "name": "b"}]
    table = (
        env.from_collection(rows).filter_batch(lambda b: pa.array([False] * b.num_rows)).collect()
    )
    assert table.num_rows == 0
    assert table.schema == pa.schema([("v", pa.int64()), ("name", pa.string())])


def test_a_collect_handle_of_an_unbounded_job_holds_every_epochs_rows(
    spark: Any, tmp_path: Path
) -> None:
    """``collect_async(...).table()``, ``result.collected`` and the result a later start
    of the finished job returns all hold the rows of every epoch, not the last one's."""

    def build() -> tuple[StreamExecutionEnvironment, Any]:
        env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
        rows = env.from_sequence(rows_per_epoch=25, end=100).collect_async("ids")
        return env, rows

    env, rows = build()
    result = env.execute("epochs")
    assert result.epochs == 4
    assert sorted(rows.table().column("id").to_pylist()) == list(range(100))
    assert sorted(result.collected["ids"].column("id").to_pylist()) == list(range(100))
    again, rows = build()
    stored = again.execute("epochs")
    assert stored.already_finished
    assert sorted(stored.collected["ids"].column("id").to_pylist()) == list(range(100))
    assert sorted(rows.table().column("id").to_pylist()) == list(range(100))


def test_a_job_in_another_thread_runs_on_the_process_spark_and_leaves_it_running(
    spark: Any,
) -> None:
    """A thread of the caller's has no active session of its own (Spark keeps it per
    JVM thread); its job takes the session the process runs, and does not stop it."""
    import threading

    from pyspark.sql import SparkSession

    seen: dict[str, Any] = {}

    def job() -> None:
        seen["active"] = SparkSession.getActiveSession()
        env = StreamExecutionEnvironment(parallelism=2)
        seen["rows"] = env.from_collection([{"v": v} for v in range(10)]).collect().to_pylist()

    thread = threading.Thread(target=job)
    thread.start()
    thread.join()
    assert seen["active"] is None  # what made a job stop the process's Spark at its end
    assert sorted(row["v"] for row in seen["rows"]) == list(range(10))
    assert spark.sparkContext._jsc is not None  # not stopped
    assert spark.range(3).count() == 3
