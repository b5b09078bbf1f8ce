"""Sources on Spark: Parquet files, a Spark DataFrame, and the result's per-vertex figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.collect import CollectSink


def test_from_parquet_reads_every_file_once(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for part in range(5):
        pq.write_table(
            pa.table({"v": list(range(part * 100, part * 100 + 100))}), data / f"{part}.parquet"
        )
    (data / "_ignored").mkdir()
    pq.write_table(pa.table({"v": [-1]}), data / "_ignored" / "x.parquet")
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path / "c"))
    table = env.from_parquet(str(data), batch_size=30).filter(lambda r: r["v"] % 5 == 0).collect()
    assert sorted(table.column("v").to_pylist()) == list(range(0, 500, 5))


def test_from_dataframe_and_the_results_figures(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(1000).selectExpr("id as v", "id % 3 as k")
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    stream = env.from_dataframe(frame, name="frame").filter(lambda r: r["v"] < 10, name="small")
    stream.sink_to(CollectSink("small"), name="small-rows")
    result = env.execute("frame")
    assert sorted(result.collected["small-rows"].column("v").to_pylist()) == list(range(10))
    chain = "frame -> small -> small-rows"
    assert result.records_out == {chain: 10}  # a sink vertex counts what its sink received
    assert result.vertex_seconds[chain] > 0
    assert result.checkpoint_id == 1
