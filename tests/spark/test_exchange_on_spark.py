"""The keyed exchange on Spark with Spark's small input batches (framed together), the
run's Arrow batch size (and a user's own kept), and a
DataFrame source's partitions counted once per job, again after a setting changed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import state_functions
from epoch_stages import stage_task_counts
from pyspark import cloudpickle
from pyspark.sql import functions as F
from state_functions import BatchRunningSum

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.plan.graph import Transformation
from flintlock.core.spark import source_partitions, stage_frames
from flintlock.sinks.collect import CollectSink

cloudpickle.register_pickle_by_value(state_functions)  # workers cannot import tests/
pytestmark = pytest.mark.slow
ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def test_running_sums_from_small_spark_batches_are_exact(spark: Any, tmp_path: Path) -> None:
    rows, keys = 12_000, 97
    frame = spark.range(0, rows, 1, 3).select(
        F.col("id").alias("i"), (F.col("id") % keys).alias("k"), (F.col("id") % 10 + 1).alias("v")
    )
    spark.conf.set(ARROW_BATCH, "400")  # 10 batches per partition, framed a few at a time
    try:
        env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
        stream = env.from_dataframe(frame).key_by("k").process_batch(BatchRunningSum())
        table = stream.execute_and_collect("small-batches")
    finally:
        spark.conf.unset(ARROW_BATCH)
    i, k = table.column("i").to_numpy(), table.column("k").to_numpy()
    total = table.column("total").to_numpy()
    assert sorted(i.tolist()) == list(range(rows)) and (k == i % keys).all()
    order = np.lexsort((total, k))  # per key, by total: each is the one before plus v
    k, total, v = k[order], total[order], i[order] % 10 + 1
    before = np.concatenate([[0], total[:-1]])
    before[np.concatenate([[True], k[1:] != k[:-1]])] = 0
    assert (total - before == v).all()
    ends = {key: int(sum(j % 10 + 1 for j in range(key, rows, keys))) for key in range(keys)}
    last = np.concatenate([k[1:] != k[:-1], [True]])
    assert dict(zip(k[last].tolist(), total[last].tolist(), strict=True)) == ends


class SourceCountSpy:
    """Records each count (``partition_count``: was it the job's frame, on which thread)
    and each check in a job's own query (``planned_partitions``: what it found); the real
    functions run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, frame: Any) -> None:
        self.counted: list[bool] = []
        self.threads: list[str] = []
        self.checked: list[int] = []
        plain_count = source_partitions.partition_count
        plain_check = source_partitions.planned_partitions

        def counting(counted: Any) -> Any:
            self.counted.append(counted is frame)
            self.threads.append(threading.current_thread().name)
            return plain_count(counted)

        def checking(epoch_frame: Any) -> int:
            self.checked.append(plain_check(epoch_frame))
            return self.checked[-1]

        monkeypatch.setattr(source_partitions, "partition_count", counting)
        monkeypatch.setattr(source_partitions, "planned_partitions", checking)


def test_a_keyed_job_counts_its_source_once_per_job_under_the_jobs_settings(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = spark.range(0, 100, 1, 2).groupBy((F.col("id") % 10).alias("k")).count()
    frame = counts.selectExpr("k as i", "k", "count as v")  # a key's one row: v = 10
    spy = SourceCountSpy(monkeypatch, frame)

    def run(name: str) -> Any:
        env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
        stream = env.from_dataframe(frame).key_by("k").process_batch(BatchRunningSum())
        stream.sink_to(CollectSink("rows"), name="rows")
        result = env.execute(name)
        table = result.collected["rows"]
        assert sorted(table.column("k").to_pylist()) == list(range(10))
        assert table.column("total").to_pylist() == [10] * 10
        return result

    first = run("first")
    assert spy.counted == [True]  # planned once, though the job asks for it twice
    assert spy.checked == []  # two stages: counted, not checked
    assert 4 in stage_task_counts(spark, first)  # spark.sql.shuffle.partitions: 4 subtasks
    spark.conf.set("spark.sql.shuffle.partitions", "3")  # the frame now has 3 partitions
    try:
        second = run("second")
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    assert spy.counted == [True, True]  # counted anew, once
    tasks = stage_task_counts(spark, second)
    assert 3 in tasks and 4 not in tasks
    run("third")
    assert len(spy.counted) == 3  # every job counts: a table's files may have changed since
    # beside the driver's start (lease, job folder), on the one counting thread
    assert all(name.startswith("flintlock-partition-count") for name in spy.threads), spy.threads


def test_counts_still_running_are_waited_for_before_the_settings_end(spark: Any) -> None:
    """A start that ends early (another driver holds the lease) leaves no count running
    after the job's settings (AQE off) are put back: it would plan under the user's."""
    frames = [
        spark.range(0, 100, 1, 2).groupBy((F.col("id") % 7).alias("v")).count(),
        spark.range(0, 10, 1, 3),
    ]
    graph = [
        Transformation(
            n,
            f"s{n}",
            lambda: None,
            2,
            is_source=True,
            spark_source=frame,
            parallelism_from_partitions=True,
        )
        for n, frame in enumerate(frames)
    ]
    counts = source_partitions.SourcePartitionCounts(graph, max_parallelism=128)
    counts.close()
    assert all(count.done() for count in counts._counts.values())
    counted = source_partitions.SourcePartitionCounts(graph, max_parallelism=128).transformations()
    assert [t.parallelism for t in counted] == [
        int(spark.conf.get("spark.sql.shuffle.partitions")),
        3,
    ]


def _batch_sizes(batch: Any) -> Any:
    import pyarrow as pa

    return pa.record_batch({"rows": pa.array([batch.num_rows] * batch.num_rows, pa.int64())})


def test_a_job_reads_spark_batches_of_the_exchange_size_unless_the_user_chose_one(
    spark: Any, tmp_path: Path
) -> None:
    """A run asks Spark for 65,536-row Arrow batches (what the exchange gathers) and puts
    the setting back; a size the user set stays, for the job too."""
    frame = spark.range(0, 150_000, 1, 1)

    def sizes(name: str) -> list[int]:
        env = StreamExecutionEnvironment(parallelism=1, spark=spark, checkpoint_dir=str(tmp_path))
        table = env.from_dataframe(frame).map_batch(_batch_sizes).execute_and_collect(name)
        column = table.column("rows").to_pylist()
        return sorted(set(column), reverse=True)

    assert spark.conf.get(ARROW_BATCH) == "10000"  # Spark's default, unset
    assert sizes("default") == [65_536, 150_000 - 2 * 65_536]
    assert spark.conf.get(ARROW_BATCH) == "10000"
    spark.conf.set(ARROW_BATCH, "40000")
    try:
        assert sizes("users") == [40_000, 150_000 - 3 * 40_000]
        assert spark.conf.get(ARROW_BATCH) == "40000"
    finally:
        spark.conf.unset(ARROW_BATCH)


def test_a_one_stage_job_checks_its_sources_count_in_its_own_query(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-stage job is never counted: it starts from the source's parallelism (a frame
    new to the process) or an earlier job's count, and checks it in its own query, which
    the action then runs. A count that does not hold is replaced by the partitions the
    check found, and the job planned anew before anything runs."""
    frame = spark.range(0, 100, 1, 2).groupBy((F.col("id") % 10).alias("v")).count()
    spy = SourceCountSpy(monkeypatch, frame)
    built: list[int] = []
    plain_build = stage_frames.build_stages

    def building(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return plain_build(*args, **kwargs)

    monkeypatch.setattr(stage_frames, "build_stages", building)

    def run(name: str, parallelism: int) -> Any:
        env = StreamExecutionEnvironment(
            parallelism=parallelism, spark=spark, checkpoint_dir=str(tmp_path)
        )
        env.from_dataframe(frame).sink_to(CollectSink("rows"), name="rows")  # one stage?
        result = env.execute(name)
        assert sorted(result.collected["rows"].column("v").to_pylist()) == list(range(10))
        return result

    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    first = run("first", 4)
    assert (spy.counted, spy.checked) == ([], [4])  # the parallelism, 4, held
    assert stage_task_counts(spark, first) == [2, 4]  # the frame's shuffle, then one stage
    run("second", 4)
    assert (spy.counted, spy.checked) == ([], [4, 4])
    # the second job shares the first one's stages, and plans its own query over them:
    # the query checked is the one run
    assert len(built) == 1
    spark.conf.set("spark.sql.shuffle.partitions", "3")  # the frame now has 3 partitions
    try:
        third = run("third", 4)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    assert (spy.counted, spy.checked) == ([], [4, 4, 3])  # missed: planned anew from 3
    tasks = stage_task_counts(spark, third)
    assert 3 in tasks and 4 in tasks  # 3 source subtasks, then the sink's 4 after a rebalance
    other = spark.range(0, 60, 1, 6).selectExpr("id % 10 as v")  # 6 partitions, new here
    spy = SourceCountSpy(monkeypatch, other)
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    env.from_dataframe(other).sink_to(CollectSink("rows"), name="rows")
    fourth = env.execute("fourth")
    assert (spy.counted, spy.checked) == ([], [6])  # the guess, 2, missed: 6 found
    assert stage_task_counts(spark, fourth) == [6, 2]  # read in place, rebalanced to 2
    assert sorted(fourth.collected["rows"].column("v").to_pylist()) == sorted(
        i % 10 for i in range(60)
    )
    env = StreamExecutionEnvironment(
        parallelism=2, max_parallelism=2, spark=spark, checkpoint_dir=str(tmp_path)
    )
    env.from_dataframe(other).sink_to(CollectSink("rows"), name="rows")
    fifth = env.execute("fifth")  # 6 (counted by the fourth job) over max_parallelism 2
    assert (spy.counted, spy.checked) == ([], [6, 2])  # coalesced to 2, one stage: held
    assert stage_task_counts(spark, fifth) == [2]
    assert fifth.collected["rows"].num_rows == 60
