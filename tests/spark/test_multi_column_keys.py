"""Multi-column keys and key selectors on real local Spark equal a pyarrow group-by (and a
single-column key over the same combined key); all-null first outputs and empty inputs
keep their types."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flintlock import KeyedProcessFunction, ValueStateDescriptor
from flintlock.core.api.keys import KeySelector
from flintlock.core.datastream.environment import StreamExecutionEnvironment

END = 2**62
N = 6000


def orders() -> pa.Table:
    """Rows over 5 regions x 23 users (not every pair occurs), unevenly spread."""
    return pa.table(
        {
            "region": [f"r{i * 7 % 5}" for i in range(N)],
            "user": [i * 11 % 23 for i in range(N)],
            "v": [i % 97 for i in range(N)],
        }
    )


class SumPerKey(KeyedProcessFunction):
    """Sums ``v`` per key in keyed state; a timer at the end of time emits the key's sum."""

    output_schema = pa.schema([("key", pa.string()), ("total", pa.int64())])

    def open(self) -> None:
        self.total = self.runtime_context.get_state(
            ValueStateDescriptor("total", pa.int64(), default=0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.total.update(self.total.value() + value["v"])
        ctx.timer_service().register_event_time_timer(END)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        key = ctx.get_current_key()
        label = f"{key[0]}|{key[1]}" if isinstance(key, tuple) else key
        out.collect({"key": label, "total": self.total.value()})


def reference(table: pa.Table) -> dict[str, int]:
    grouped = table.group_by(["region", "user"]).aggregate([("v", "sum")])
    return {
        f"{r}|{u}": s
        for r, u, s in zip(
            grouped.column("region").to_pylist(),
            grouped.column("user").to_pylist(),
            grouped.column("v_sum").to_pylist(),
            strict=True,
        )
    }


class RegionUser(KeySelector):
    """The batch key selector (fast path): a struct array of the two columns."""

    def key_array(self, batch: pa.RecordBatch) -> pa.Array:
        parts = [batch.column("region"), batch.column("user")]
        return pa.StructArray.from_arrays(parts, names=["region", "user"])


def by_region_and_user(row: dict[str, Any]) -> tuple[str, int]:
    return (row["region"], row["user"])


def combined(batch: pa.RecordBatch) -> pa.RecordBatch:
    joined = pc.binary_join_element_wise(
        batch.column("region"), pc.cast(batch.column("user"), pa.string()), "|"
    )
    return batch.append_column("combined", joined)


@pytest.mark.parametrize("key", ["columns", "function", "batch selector", "single column"])
def test_keys_give_a_group_by_result(spark: Any, key: str) -> None:
    table = orders()
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    stream = env.from_arrow(table, batch_size=500)
    if key == "columns":
        keyed = stream.key_by(["region", "user"])
    elif key == "function":
        keyed = stream.key_by(by_region_and_user)
    elif key == "batch selector":
        keyed = stream.key_by(RegionUser())
    else:
        keyed = stream.map_batch(combined, name="combine").key_by("combined")
    sums = (
        keyed.process(SumPerKey(), name="sum").set_parallelism(3).execute_and_collect(f"keys-{key}")
    )
    got = dict(zip(sums.column("key").to_pylist(), sums.column("total").to_pylist(), strict=True))
    assert sums.num_rows == len(got)  # each key once: every row of a key met one subtask
    assert got == reference(table)


def test_an_all_null_first_output_batch_does_not_lock_the_type(spark: Any) -> None:
    rows = [{"i": i} for i in range(40)]

    def later(row: dict[str, Any]) -> dict[str, Any]:
        return {"i": row["i"], "v": row["i"] * 2 if row["i"] >= 20 else None}

    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    out = (
        env.from_collection(rows, batch_size=5)
        .map(later, name="later")
        .execute_and_collect("nulls-first")
    )
    assert out.schema == pa.schema([("i", pa.int64()), ("v", pa.int64())])
    got = sorted(out.to_pylist(), key=lambda r: r["i"])
    assert got == [later(r) for r in rows]


def test_an_empty_input_keeps_its_schema_on_spark(spark: Any) -> None:
    schema = pa.schema([("region", pa.string()), ("user", pa.int64()), ("v", pa.int64())])
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    empty = env.from_collection([], schema=schema)
    assert empty.execute_and_collect("empty-direct").schema == schema

    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    sums = (
        env.from_collection([], schema=schema)
        .filter(lambda r: r["v"] > 0)
        .key_by(["region", "user"])
        .process(SumPerKey(), name="sum")
        .execute_and_collect("empty-keyed")
    )
    assert sums.schema == SumPerKey.output_schema
    assert sums.num_rows == 0
