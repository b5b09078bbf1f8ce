"""Batch-level keyed state: ``values(keys)`` / ``update_values(keys, values)`` and the keyed
batch process function give the same results as the per-record API, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from state_functions import BatchRunningSum, RunningSum, running_sums

from flintlock import (
    KeyedBatchProcessFunction,
    KeyedProcessFunction,
    LifecycleError,
    ManualClock,
    StateTtlConfig,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
)
from flintlock.errors import GraphError
from flintlock.operators.batch_process import KeyedBatchProcessOperator
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import OneInputHarness

BACKENDS = ["hashmap", "sqlite", "key-group-dicts"]


def w2_table(rows: int, keys: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "i": np.arange(rows, dtype=np.int64),
            "k": rng.integers(0, keys, rows, dtype=np.int64),
            "v": rng.integers(-50, 100, rows, dtype=np.int64),
        }
    )


def reference(table: pa.Table) -> list[int]:
    """The running sum per key of every row, in plain Python."""
    totals: dict[int, int] = {}
    out = []
    for k, v in zip(table.column("k").to_pylist(), table.column("v").to_pylist(), strict=True):
        totals[k] = totals.get(k, 0) + v
        out.append(totals[k])
    return out


def run(operator_factory: Any, table: pa.Table, backend: str, batch_rows: int) -> list[int]:
    """Feed ``table`` in batches, with a checkpoint and restore half way; the totals out."""
    half = table.num_rows // 2
    first = OneInputHarness(operator_factory(), state_backend=backend)
    for batch in table.slice(0, half).to_batches(max_chunksize=batch_rows):
        first.process_batch(batch)
    second = OneInputHarness(
        operator_factory(), state_backend=backend, restore_from=first.checkpoint(1)
    )
    for batch in table.slice(half).to_batches(max_chunksize=batch_rows):
        second.process_batch(batch)
    second.complete(2)
    out = pa.concat_tables([first.output(), second.output()])
    assert out.column("i").to_pylist() == list(range(table.num_rows))
    return out.column("total").to_pylist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_level_and_per_record_running_sums_are_equal(backend: str) -> None:
    table = w2_table(3000, 50)
    expected = reference(table)
    per_record = run(
        lambda: KeyedProcessOperator(RunningSum(), key_column="k"), table, backend, 400
    )
    per_batch = run(
        lambda: KeyedBatchProcessOperator(BatchRunningSum(), key_column="k"), table, backend, 400
    )
    assert per_record == expected
    assert per_batch == expected


def test_running_sums_helper_matches_python() -> None:
    codes = np.array([2, 0, 2, 1, 0, 2])
    values = np.array([1, 2, 3, 4, 5, 6])
    assert running_sums(codes, values).tolist() == [1, 2, 4, 4, 7, 10]


class Probe(KeyedBatchProcessFunction):
    """Reads the state of a batch's keys, then writes each row's ``v`` (last row wins)."""

    def __init__(self, ttl_ms: int | None = None) -> None:
        config = StateTtlConfig(ttl_ms) if ttl_ms else None
        self.descriptor = ValueStateDescriptor("s", pa.string(), default="-", ttl_config=config)

    def open(self) -> None:
        self.state = self.runtime_context.get_state(self.descriptor)

    def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> pa.RecordBatch:
        before = self.state.values(keys)
        self.state.update_values(keys, batch.column("v"))
        return pa.record_batch({"k": keys, "before": before})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ttl_ms", [None, 10])
def test_values_returns_defaults_and_update_values_lets_the_last_row_win(
    backend: str, ttl_ms: int | None
) -> None:
    clock = ManualClock()
    harness = OneInputHarness(
        KeyedBatchProcessOperator(Probe(ttl_ms), key_column="k"),
        state_backend=backend,
        ttl_clock=clock,
    )
    harness.process_records([{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 1, "v": "c"}])
    harness.process_records([{"k": 1, "v": None}, {"k": 2, "v": "d"}, {"k": 3, "v": "e"}])
    clock.advance(10)  # with a TTL of 10, everything written so far expires now
    harness.process_records([{"k": 2, "v": "f"}, {"k": 3, "v": "g"}])
    befores = [(r["k"], r["before"]) for r in harness.output_rows()]
    assert befores[:6] == [(1, "-"), (2, "-"), (1, "-"), (1, "c"), (2, "b"), (3, "-")]
    assert befores[6:] == ([(2, "-"), (3, "-")] if ttl_ms else [(2, "d"), (3, "e")])


def test_a_batch_with_a_key_of_another_subtask_is_refused_naming_it() -> None:
    operator = KeyedBatchProcessOperator(Probe(), key_column="k", name="probe")
    harness = OneInputHarness(operator, parallelism=2, subtask_index=0)
    with pytest.raises(LifecycleError) as caught:
        harness.process_records([{"k": k, "v": "x"} for k in range(40)])
    assert "not in this subtask's 0..63" in str(caught.value.__cause__)
    assert caught.value.operator == "probe"


def test_process_batch_needs_a_keyed_stream_and_a_batch_function() -> None:
    stream = StreamExecutionEnvironment(parallelism=1).from_collection([{"k": 1, "v": 2}])
    with pytest.raises(GraphError, match="needs a keyed stream: call key_by"):
        stream.process_batch(BatchRunningSum())
    with pytest.raises(GraphError, match="must be a KeyedBatchProcessFunction"):
        stream.key_by("k").process_batch(RunningSum())  # type: ignore[arg-type]


def test_per_record_value_state_keeps_no_ttl_code_on_its_path() -> None:
    """Value state without TTL is the plain handle (W2's hot path), with TTL the other."""

    class Both(KeyedProcessFunction):
        def open(self) -> None:
            ctx = self.runtime_context
            self.plain = ctx.get_state(ValueStateDescriptor("p"))
            self.ttl = ctx.get_state(ValueStateDescriptor("t", ttl_config=StateTtlConfig(5)))

    function = Both()
    OneInputHarness(KeyedProcessOperator(function, key_column="k")).open()
    assert type(function.plain).__name__ == "_ValueState"
    assert type(function.ttl).__name__ == "_TtlValueState"


ROW = pa.struct([("a", pa.int64()), ("b", pa.string())])


class KeepRows(KeyedBatchProcessFunction):
    """Stores each key's row as a struct value and emits what keys 1 and 2 hold."""

    def open(self, runtime_context: Any = None) -> None:
        self.rows = self.runtime_context.get_state(ValueStateDescriptor("rows", arrow_type=ROW))

    def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> pa.RecordBatch:
        values = pa.StructArray.from_arrays([batch["a"], batch["b"]], ["a", "b"])
        self.rows.update_values(keys, values)
        return pa.record_batch({"held": self.rows.values(pa.array([1, 2]))})


@pytest.mark.parametrize("backend", BACKENDS)
def test_struct_values_written_a_batch_at_a_time_read_back_with_restored_ones(
    backend: str,
) -> None:
    """A struct value stored by update_values is a dict, as a restored one is: both read
    back together (it was a tuple, and reading it beside a restored dict failed)."""
    first = OneInputHarness(
        KeyedBatchProcessOperator(KeepRows(), key_column="k"), state_backend=backend
    )
    first.process_batch(pa.record_batch({"k": [1], "a": [1], "b": ["x"]}))
    second = OneInputHarness(
        KeyedBatchProcessOperator(KeepRows(), key_column="k"),
        state_backend=backend,
        restore_from=first.checkpoint(1),
    )
    second.process_batch(pa.record_batch({"k": [2], "a": [2], "b": ["y"]}))
    assert second.output().column("held").to_pylist() == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
