"""A DataFrame source reads its input in place: its partitions are the source subtasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from epoch_stages import stage_task_counts
from pyspark.sql import functions as F

from flintlock import FlintlockError, KeyedProcessFunction, ValueStateDescriptor
from flintlock.core.api.functions import MapFunction, Row
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.collect import CollectSink


class TagSubtask(MapFunction):
    """Adds the index of the subtask that read each row."""

    def open(self) -> None:
        self.subtask = self.runtime_context.task_info.subtask_index

    def map(self, value: Row) -> Row:
        return {"v": value["v"], "subtask": self.subtask}


def rows_by_subtask(env: StreamExecutionEnvironment, frame: Any, **source: Any) -> dict[int, int]:
    stream = env.from_dataframe(frame, name="frame", **source)
    table = stream.map(TagSubtask(), name="tag").collect()
    return dict(
        zip(table.column("v").to_pylist(), table.column("subtask").to_pylist(), strict=True)
    )


def test_each_partition_is_one_source_subtask(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(0, 300, 1, 3).selectExpr("id as v")
    partition_of = {
        row.v: row.p for row in frame.select("v", F.spark_partition_id().alias("p")).collect()
    }
    env = StreamExecutionEnvironment(parallelism=3, spark=spark, checkpoint_dir=str(tmp_path))
    assert rows_by_subtask(env, frame) == partition_of
    assert sorted(set(partition_of.values())) == [0, 1, 2]


def test_the_source_stage_reads_the_frame_without_a_shuffle(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(0, 1000, 1, 3).selectExpr("id as v")
    env = StreamExecutionEnvironment(parallelism=3, spark=spark, checkpoint_dir=str(tmp_path))
    env.from_dataframe(frame).filter(lambda r: r["v"] % 2 == 0).sink_to(
        CollectSink("even"), name="even"
    )
    results = [env.execute("in-place")]
    tasks = stage_task_counts(spark, results[0])
    assert tasks == [3]  # the source stage alone (a task per partition); the driver collects it
    assert sorted(results[0].collected["even"].column("v").to_pylist()) == list(range(0, 1000, 2))


def test_a_source_with_more_partitions_than_the_job_rebalances_after_reading(
    spark: Any, tmp_path: Path
) -> None:
    frame = spark.range(0, 500, 1, 5).selectExpr("id as v")
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    env.from_dataframe(frame).map(lambda r: {"v": r["v"] * 2}).sink_to(
        CollectSink("doubled"), name="doubled"
    )
    results = [env.execute("wide-source")]
    tasks = stage_task_counts(spark, results[0])
    assert tasks == [5, 2]  # read in place by 5 subtasks, then the job's 2
    assert sorted(results[0].collected["doubled"].column("v").to_pylist()) == [
        2 * v for v in range(500)
    ]


def test_parallelism_asks_for_a_repartition(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(0, 400, 1, 1).selectExpr("id as v")
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    by_subtask = rows_by_subtask(env, frame, parallelism=2)
    assert sorted(by_subtask) == list(range(400))
    assert sorted(set(by_subtask.values())) == [0, 1]  # one input partition, two subtasks


def test_set_parallelism_on_the_source_repartitions_its_input(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(0, 400, 1, 1).selectExpr("id as v")
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    stream = env.from_dataframe(frame, name="frame").set_parallelism(2)
    table = stream.map(TagSubtask(), name="tag").collect()
    assert sorted(table.column("v").to_pylist()) == list(range(400))
    assert sorted(set(table.column("subtask").to_pylist())) == [0, 1]


def test_an_empty_frame_without_partitions_keeps_its_schema(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(0).selectExpr("id as v").limit(0)
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    table = env.from_dataframe(frame).collect()
    assert table.num_rows == 0
    assert table.schema.names == ["v"]


def test_a_bad_parallelism_is_refused_before_spark_runs(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    with pytest.raises(FlintlockError, match="from_dataframe: parallelism 0 must be an int"):
        env.from_dataframe(spark.range(3), parallelism=0)


def test_the_partitions_are_counted_when_the_job_starts(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(0, 100, 1, 2).selectExpr("id % 7 as v").distinct()
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
        env.from_dataframe(frame).sink_to(CollectSink("keys"), name="keys")
        spark.conf.set("spark.sql.shuffle.partitions", "4")  # the frame now has 4 partitions
        results = [env.execute("later")]
        tasks = stage_task_counts(spark, results[0])
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    # the frame's own shuffle, its 4 partitions read in place, the job's 2 sinks
    assert tasks == [2, 4, 2]
    assert sorted(results[0].collected["keys"].column("v").to_pylist()) == list(range(7))


class RunningCount(KeyedProcessFunction):
    """Emits each key's running count (keyed ValueState)."""

    def open(self) -> None:
        self.count = self.runtime_context.get_state(ValueStateDescriptor("n", default=0))

    def process_element(self, value: Row, ctx: Any, out: Any) -> None:
        self.count.update(self.count.value() + 1)
        out.collect({"k": value["k"], "n": self.count.value()})


def test_a_frame_with_more_partitions_than_max_parallelism_is_coalesced(
    spark: Any, tmp_path: Path
) -> None:
    frame = spark.range(0, 600, 1, 6).selectExpr("id % 10 as k", "id as v")
    env = StreamExecutionEnvironment(
        parallelism=2, max_parallelism=4, spark=spark, checkpoint_dir=str(tmp_path)
    )
    stream = env.from_dataframe(frame).key_by("k").process(RunningCount())
    stream.sink_to(CollectSink("counts"), name="counts")
    results = [env.execute("coalesced")]
    tasks = stage_task_counts(spark, results[0])
    assert tasks == [4, 2]  # 6 partitions read by 4 subtasks (max_parallelism), no shuffle
    table = results[0].collected["counts"]
    final = {}
    for k, n in zip(table.column("k").to_pylist(), table.column("n").to_pylist(), strict=True):
        final[k] = max(final.get(k, 0), n)
    assert final == {k: 60 for k in range(10)}
    assert table.num_rows == 600
