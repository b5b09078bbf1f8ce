"""Chained per-record operators run as one loop per batch (``row_output.FusedRows``):
the same output, metrics and errors as one batch per operator, records in Flink's order."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import LifecycleError, ProcessFunction
from flintlock.core.hooks.manager import hookimpl
from flintlock.core.runtime.output import ChainingOutput
from flintlock.core.runtime.row_output import RowsOutput
from flintlock.operators.basic import FilterOperator, FlatMapOperator, MapOperator
from flintlock.operators.process import ProcessOperator
from flintlock.testing import OneInputHarness

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_docs import python_blocks


class BatchObserver:
    """Implements the per-batch hook: the chain must then keep one batch per operator."""

    @hookimpl
    def flintlock_operator_process_batch(self, operator: Any) -> None:
        pass


class Tally(ProcessFunction):
    """Emits every row with its running count, and a last row at the end of input."""

    def open(self) -> None:
        self.seen = 0

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.seen += 1
        out.collect({**value, "seen": self.seen})

    def on_end_of_input(self, out: Any) -> None:
        out.collect({"k": -1, "v": -1.0, "copy": -1, "seen": self.seen})


def operators(calls: list[tuple[str, int]] | None = None) -> list[Any]:
    """map -> filter -> flat_map -> process -> map, all per record, logging their calls."""
    log = calls.append if calls is not None else (lambda _: None)

    def double(row: dict[str, Any]) -> dict[str, Any]:
        log(("map", row["k"]))
        return {"k": row["k"], "v": row["v"] * 2}

    def odd(row: dict[str, Any]) -> bool:
        log(("filter", row["k"]))
        return row["k"] % 2 == 1

    def twice(row: dict[str, Any]) -> list[dict[str, Any]]:
        log(("flat_map", row["k"]))
        return [{**row, "copy": c} for c in range(2)]

    def plus_one(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "seen": row["seen"] + 100}

    return [
        MapOperator(double),
        FilterOperator(odd),
        FlatMapOperator(twice),
        ProcessOperator(Tally()),
        MapOperator(plus_one, name="after"),
    ]


def batches() -> list[pa.RecordBatch]:
    keys = list(range(10))
    return [
        pa.record_batch({"k": keys[:6], "v": [float(k) for k in keys[:6]]}),
        pa.record_batch(
            {"k": [], "v": []}, schema=pa.schema([("k", pa.int64()), ("v", pa.float64())])
        ),
        pa.record_batch({"k": keys[6:], "v": [float(k) for k in keys[6:]]}),
    ]


def run(plugins: list[object]) -> OneInputHarness:
    harness = OneInputHarness(*operators(), plugins=plugins)
    for batch in batches():
        harness.process_batch(batch)
    harness.complete()
    return harness


def test_a_fused_chain_gives_what_one_batch_per_operator_gives() -> None:
    fused, batched = run([]), run([BatchObserver()])
    assert [type(o) for o in fused.task.chain.outputs[:-1]] == [RowsOutput] * 4
    assert {type(o) for o in batched.task.chain.outputs[:-1]} == {ChainingOutput}
    assert fused.output().to_pylist() == batched.output().to_pylist()
    expected = [
        {"k": k, "v": 2.0 * k, "copy": c, "seen": 100 + 2 * (k // 2) + c + 1}
        for k in (1, 3, 5, 7, 9)
        for c in range(2)
    ] + [{"k": -1, "v": -1.0, "copy": -1, "seen": 110}]
    assert fused.output().to_pylist() == expected
    # numRecordsIn of each chained operator, counted per batch either way
    assert [o.rows for o in fused.task.chain.outputs[:-1]] == [10, 5, 10, 11]
    assert [o.rows for o in batched.task.chain.outputs[:-1]] == [10, 5, 10, 11]


def test_records_go_through_the_whole_run_one_at_a_time() -> None:
    calls: list[tuple[str, int]] = []
    harness = OneInputHarness(*operators(calls))
    harness.process_batch(pa.record_batch({"k": [1, 2, 3], "v": [0.0, 0.0, 0.0]}))
    assert calls == [
        ("map", 1), ("filter", 1), ("flat_map", 1),
        ("map", 2), ("filter", 2),
        ("map", 3), ("filter", 3), ("flat_map", 3),
    ]  # fmt: skip


def test_a_failing_function_names_its_operator_and_record() -> None:
    def fails_on_four(row: dict[str, Any]) -> bool:
        if row["k"] == 4:
            raise ZeroDivisionError("no fours")
        return True

    harness = OneInputHarness(
        MapOperator(lambda r: {**r, "k": r["k"] * 2}),
        FilterOperator(fails_on_four),
        ProcessOperator(Tally()),
    )
    with pytest.raises(LifecycleError) as caught:
        harness.process_batch(pa.record_batch({"k": [1, 2, 3], "v": [0.5, 0.5, 0.5]}))
        harness.complete()
    assert (caught.value.operator, caught.value.phase) == ("filter", "run")
    assert caught.value.record == "{'k': 4, 'v': 0.5}"
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


def test_a_declared_output_schema_still_casts_what_the_next_function_sees() -> None:
    seen: list[Any] = []
    harness = OneInputHarness(
        MapOperator(lambda r: {"x": r["k"]}, output_schema=pa.schema([("x", pa.float64())])),
        MapOperator(lambda r: seen.append(r["x"]) or r, name="look"),
    )
    harness.process_batch(pa.record_batch({"k": [1, 2]}))
    harness.complete()
    assert type(harness.task.chain.outputs[0]) is ChainingOutput
    assert seen == [1.0, 2.0] and all(type(x) is float for x in seen)


def test_the_readme_example_gives_the_running_totals_of_plain_python() -> None:
    blocks = python_blocks("README.md")
    block = next(b for b in blocks if "RunningCents" in b)
    namespace: dict[str, Any] = {"__name__": "readme_fused_rows"}
    exec(compile(block, "README.md fused rows block", "exec"), namespace)
    orders, eur = [1, 2, 3, 4], [4.99, 12.5, 5.0, 0.5]
    expected, total = [], 0
    for order, euros in zip(orders, eur, strict=True):
        cents = round(euros * 100)
        if cents >= 500:
            total += cents
            expected.append({"order": order, "running": total})
    assert namespace["running"] == expected
