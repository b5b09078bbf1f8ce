"""Spark Structured Streaming input: micro-batches as epochs, exactly once across a
driver killed between flintlock's commit and Spark's, and stop/resume on a rate source."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import streaming_jobs
from pyspark import cloudpickle
from streaming_jobs import FILES, KEYS, ROWS_PER_FILE, build, write_input
from unbounded_jobs import committed_rows, epoch_under_way, wait_for_epochs

from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.errors import GraphError, JobControlError
from flintlock.sinks.files import FileSink

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(streaming_jobs)  # workers cannot import tests/

ALL = FILES * ROWS_PER_FILE


def test_a_driver_killed_after_a_commit_replays_the_batch_without_duplicates(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    write_input(base)
    script = Path(__file__).with_name("streaming_jobs.py")
    done = subprocess.run(
        [sys.executable, str(script), base, "2"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == -9, done.stdout[-2000:] + done.stderr[-3000:]
    ids = sorted(r["id"] for r in committed_rows(base))  # two whole files, once each
    files = sorted({i // ROWS_PER_FILE for i in ids})
    assert len(files) == 2
    assert ids == [i for f in files for i in range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)]

    # Spark replays micro-batch 1 (its commit log lacks it): flintlock only re-commits it
    result = build(spark, base).execute("stream", trigger=EpochTrigger.available_now())
    assert (result.status, result.epochs) == ("STOPPED", FILES - 2)
    rows = committed_rows(base)
    assert sorted(r["id"] for r in rows) == list(range(ALL))  # exactly once
    totals: dict[int, int] = {}
    for row in rows:
        totals[row["k"]] = max(totals.get(row["k"], 0), row["total"])
    assert totals == {k: sum(i for i in range(ALL) if i % KEYS == k) for k in range(KEYS)}

    again = build(spark, base).execute("stream", trigger=EpochTrigger.available_now())
    assert (again.status, again.epochs) == ("STOPPED", 0)  # nothing new arrived
    assert len(committed_rows(base)) == ALL


def rate_job(spark: Any, base: str) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    frame = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
    env.from_stream(frame).map(
        lambda row: {"value": row["value"]}, output_schema=pa.schema([("value", pa.int64())])
    ).sink_to(FileSink(f"{base}/out"))
    return env


def test_a_rate_source_stops_with_a_savepoint_and_resumes_where_it_stopped(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    client = rate_job(spark, base).execute_async("rate", trigger=EpochTrigger.processing_time(0.5))
    wait_for_epochs(client, 2)
    savepoint = client.stop()
    first = client.result()
    assert first.status == "STOPPED" and first.savepoint_path == savepoint
    values = sorted(r["value"] for r in committed_rows(base))
    assert values == list(range(len(values))) and values  # the rate source counts from 0

    client = rate_job(spark, base).execute_async("rate", trigger=EpochTrigger.processing_time(0.5))
    wait_for_epochs(client, first.epochs + 2)
    client.stop()
    client.result()
    more = sorted(r["value"] for r in committed_rows(base))
    assert len(more) > len(values)
    assert more == list(range(len(more)))  # continued at its offsets: no gap, no duplicate


def slow_value(row: dict[str, Any]) -> dict[str, Any]:
    time.sleep(0.01)  # a micro-batch of ~100 rows runs about half a second per subtask
    return {"value": row["value"]}


def test_a_stop_asked_during_a_micro_batch_is_taken_at_its_end(spark: Any, tmp_path: Path) -> None:
    """As the epoch loop and Flink's stop-with-savepoint: the micro-batch running when the
    stop came completes as the savepoint; no further micro-batch runs."""
    base = str(tmp_path)
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    frame = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
    env.from_stream(frame).map(
        slow_value, output_schema=pa.schema([("value", pa.int64())])
    ).sink_to(FileSink(f"{base}/out"))
    client = env.execute_async("late", trigger=EpochTrigger.processing_time(0.5))
    during = epoch_under_way("late", first=2)
    savepoint = client.stop()
    stopped = client.result()
    assert Path(savepoint).name.startswith(f"savepoint-{during}-")
    assert stopped.status == "STOPPED" and stopped.epochs == during
    checkpoints = Path(base, "chk", "late", "checkpoints")
    assert not Path(checkpoints, f"chk-{during + 1}").exists()
    values = sorted(r["value"] for r in committed_rows(base))
    assert values == list(range(len(values))) and values  # each row once, none after it


def test_only_a_streaming_dataframe_is_accepted(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(spark=spark, checkpoint_dir=str(tmp_path))
    with pytest.raises(GraphError, match="from_stream takes a streaming DataFrame"):
        env.from_stream(spark.range(3))


def test_a_failed_savepoint_reruns_the_micro_batch_and_the_query_goes_on(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    client = rate_job(spark, base).execute_async("rate", trigger=EpochTrigger.processing_time(0.5))
    wait_for_epochs(client, 1)
    blocker = tmp_path / "chk" / "rate" / "savepoints"
    blocker.write_text("a file where the savepoints folder goes: every savepoint fails")
    with pytest.raises(JobControlError, match="the savepoint failed"):
        client.savepoint()
    assert client.is_running()
    wait_for_epochs(client, len(client.status()["epochs"]) + 1)
    blocker.unlink()
    client.stop()
    client.result()
    values = sorted(r["value"] for r in committed_rows(base))
    assert values == list(range(len(values))) and values  # the failed batch ran once, again
