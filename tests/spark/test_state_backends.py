"""Every state type and TTL on Spark, per state backend (chosen per environment and per
job), and batch-level keyed state equal to the per-record API on the same job."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import state_functions
from pyspark import cloudpickle
from state_functions import AllStates, BatchRunningSum, RunningSum, all_states_reference, records

from flintlock import (
    KeyedProcessFunction,
    ListStateDescriptor,
    PluginError,
    StateTtlConfig,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
)

cloudpickle.register_pickle_by_value(state_functions)  # workers cannot import tests/


def by_key(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows per key, in order: a key's rows keep their order across subtasks."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["k"], []).append(row)
    return grouped


@pytest.mark.parametrize("backend", ["hashmap", "sqlite"])
def test_every_state_type_on_spark(spark: Any, tmp_path: Path, backend: str) -> None:
    data = records(400, keys=13)
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=str(tmp_path), state_backend=backend
    )
    source = env.from_collection(data, batch_size=50).set_parallelism(1)  # one order per key
    stream = source.key_by("k").process(AllStates())
    stream.sink_to(
        env.registry.get("sink", "collect")(name="out", schema=stream.schema), name="out"
    )
    result = env.execute("all-states")
    got = result.collected["out"].to_pylist()
    assert by_key(got) == by_key(all_states_reference(data))


def test_batch_level_equals_per_record_on_spark_with_the_backend_chosen_per_job(
    spark: Any, tmp_path: Path
) -> None:
    rng = np.random.default_rng(3)
    n = 20_000
    table = pa.table(
        {
            "i": np.arange(n, dtype=np.int64),
            "k": rng.integers(0, 300, n, dtype=np.int64),
            "v": rng.integers(0, 1000, n, dtype=np.int64),
        }
    )
    totals: dict[int, int] = {}
    expected = {}
    for i, k, v in zip(*(table.column(c).to_pylist() for c in ("i", "k", "v")), strict=True):
        totals[k] = totals.get(k, 0) + v
        expected[i] = totals[k]

    def run(function: Any, batch: bool, backend: str) -> dict[int, int]:
        env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
        keyed = env.from_arrow(table, batch_size=2048).set_parallelism(1).key_by("k")
        stream = keyed.process_batch(function) if batch else keyed.process(function)
        stream.sink_to(
            env.registry.get("sink", "collect")(name="out", schema=stream.schema), name="out"
        )
        name = f"w2-{backend}-{'batch' if batch else 'record'}"
        out = env.execute(name, state_backend=backend).collected["out"]
        return dict(zip(out.column("i").to_pylist(), out.column("total").to_pylist(), strict=True))

    assert run(RunningSum(), False, "sqlite") == expected
    assert run(BatchRunningSum(), True, "sqlite") == expected
    assert run(BatchRunningSum(), True, "hashmap") == expected


def test_an_unknown_backend_is_refused_before_spark_runs(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="no state backend named 'rocksdb'"):
        StreamExecutionEnvironment(parallelism=1, state_backend="rocksdb")
    env = StreamExecutionEnvironment(parallelism=1, checkpoint_dir=str(tmp_path))
    env.from_collection([{"k": 1}]).print()
    with pytest.raises(PluginError, match="no state backend named 'rocks'"):
        env.execute("job", state_backend="rocks")


class TtlCount(KeyedProcessFunction):
    """A count per key and its last values, both with a TTL of an hour."""

    output_schema = pa.schema([("k", pa.string()), ("n", pa.int64()), ("last", pa.int64())])

    def open(self) -> None:
        hour = StateTtlConfig(3_600_000)
        ctx = self.runtime_context
        self.n = ctx.get_state(ValueStateDescriptor("n", pa.int64(), default=0, ttl_config=hour))
        self.values = ctx.get_list_state(ListStateDescriptor("values", pa.int64(), ttl_config=hour))

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.n.update(self.n.value() + 1)
        self.values.add(value["v"])
        out.collect({"k": value["k"], "n": self.n.value(), "last": self.values.get()[-1]})


@pytest.mark.parametrize("backend", ["hashmap", "sqlite"])
def test_ttl_state_on_spark_stamps_processing_time(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    data = records(200, keys=9)
    env = StreamExecutionEnvironment(
        parallelism=2,
        spark=spark,
        checkpoint_dir=str(tmp_path),
        state_backend=backend,
    )
    source = env.from_collection(data, batch_size=40).set_parallelism(1)
    stream = source.key_by("k").process(TtlCount())
    stream.sink_to(
        env.registry.get("sink", "collect")(name="out", schema=stream.schema), name="out"
    )
    started = time.time_ns() // 1_000_000
    rows = env.execute("ttl").collected["out"].to_pylist()
    ended = time.time_ns() // 1_000_000
    counts: dict[str, int] = {}
    expected = []
    for record in data:
        counts[record["k"]] = counts.get(record["k"], 0) + 1
        expected.append({"k": record["k"], "n": counts[record["k"]], "last": record["v"]})
    assert by_key(rows) == by_key(expected)
    # the final checkpoint holds every key, stamped with the workers' processing time
    files = list(tmp_path.rglob("keyed-n.arrow"))
    assert len(files) == 2  # one per keyed subtask
    state = pa.concat_tables(pa.ipc.open_file(str(f)).read_all() for f in files)
    keys, values = state.column("key").to_pylist(), state.column("value").to_pylist()
    assert dict(zip(keys, values, strict=True)) == counts
    stamps = state.column("ttl_timestamp").to_pylist()
    assert all(started <= stamp <= ended for stamp in stamps)
