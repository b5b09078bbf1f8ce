"""Two-input, union, broadcast and several sinks, each on real local Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from flintlock import CoProcessFunction, ValueStateDescriptor
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.files import FileSink


class Enrich(CoProcessFunction):
    """Joins orders (input 1) with the latest customer name (input 2) per customer id."""

    def open(self) -> None:
        self.customer = self.runtime_context.get_state(ValueStateDescriptor("name", pa.string()))
        self.waiting = self.runtime_context.get_list_state(
            __import__("flintlock").ListStateDescriptor("orders", pa.int64())
        )

    def process_element1(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        name = self.customer.value()
        if name is None:
            self.waiting.add(value["order"])
        else:
            out.collect({"order": value["order"], "name": name})

    def process_element2(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.customer.update(value["name"])
        for order in self.waiting.get():
            out.collect({"order": order, "name": value["name"]})
        self.waiting.clear()


def env_for(spark: Any, tmp_path: Path, parallelism: int = 2) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=str(tmp_path / "chk")
    )


def test_connect_co_process_joins_keyed_inputs(spark: Any, tmp_path: Path) -> None:
    env = env_for(spark, tmp_path)
    orders = env.from_collection(
        [{"order": i, "customer": i % 10} for i in range(200)], batch_size=25
    )
    customers = env.from_collection([{"customer": c, "name": f"c{c}"} for c in range(10)])
    joined = orders.key_by("customer").connect(customers.key_by("customer")).process(Enrich())
    table = joined.execute_and_collect("join")
    assert sorted(table.to_pylist(), key=lambda r: r["order"]) == [
        {"order": i, "name": f"c{i % 10}"} for i in range(200)
    ]


def test_union_reads_every_stream_once(spark: Any, tmp_path: Path) -> None:
    env = env_for(spark, tmp_path)
    a = env.from_collection([{"v": i} for i in range(50)], batch_size=7)
    b = env.from_collection([{"v": 1000 + i} for i in range(30)], batch_size=7).set_parallelism(1)
    c = env.from_collection([{"v": 5000 + i} for i in range(20)], batch_size=7)
    table = a.union(b, c).map(lambda r: {"v": r["v"] + 1}, name="inc").execute_and_collect("union")
    assert sorted(table.column("v").to_pylist()) == sorted(
        [i + 1 for i in range(50)] + [1001 + i for i in range(30)] + [5001 + i for i in range(20)]
    )


def test_broadcast_sends_every_batch_to_every_subtask(spark: Any, tmp_path: Path) -> None:
    env = env_for(spark, tmp_path, parallelism=3)
    rows = [{"v": i} for i in range(10)]
    stream = env.from_collection(rows, batch_size=4).set_parallelism(1)
    tagged = stream.broadcast().map_batch(
        lambda b: b.append_column(
            "subtask",
            pa.array([__import__("pyspark").TaskContext.get().partitionId()] * b.num_rows),
        ),
        name="tag",
    )
    table = tagged.execute_and_collect("broadcast")
    assert table.num_rows == 30
    by_subtask: dict[int, list[int]] = {}
    for row in table.to_pylist():
        by_subtask.setdefault(row["subtask"], []).append(row["v"])
    assert len(by_subtask) == 3
    assert all(sorted(values) == list(range(10)) for values in by_subtask.values())


def test_two_sinks_both_commit_exactly_once(spark: Any, tmp_path: Path) -> None:
    env = env_for(spark, tmp_path)
    numbers = env.from_collection([{"v": i} for i in range(100)], batch_size=9)
    evens = numbers.filter(lambda r: r["v"] % 2 == 0, name="evens")
    evens.sink_to(FileSink(str(tmp_path / "evens")))
    collect = CollectSink("all")
    numbers.map(lambda r: {"v": r["v"] * 10}, name="times10").sink_to(collect, name="all")
    result = env.execute("two-sinks")
    files = ds.dataset(str(tmp_path / "evens"), format="parquet").to_table()
    assert sorted(files.column("v").to_pylist()) == list(range(0, 100, 2))
    assert sorted(result.collected["all"].column("v").to_pylist()) == [i * 10 for i in range(100)]
