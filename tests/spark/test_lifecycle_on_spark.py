"""The lifecycle on Spark is the lifecycle of the harness; failures name where they were."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import (
    CoProcessFunction,
    KeyedProcessFunction,
    LifecycleError,
    ValueStateDescriptor,
    hookimpl,
)
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.operators.process import CoProcessOperator, KeyedProcessOperator
from flintlock.operators.sink import TwoPhaseCommitSinkOperator
from flintlock.sinks.collect import CollectSink
from flintlock.testing import LifecycleRecorder, OneInputHarness, TwoInputHarness

PER_BATCH = {"operator_process_batch"}


class Count(KeyedProcessFunction):
    """Counts records per key; emits the count when the input ends (event-time timer)."""

    def open(self) -> None:
        self.count = self.runtime_context.get_state(
            ValueStateDescriptor("count", pa.int64(), default=0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.count.update(self.count.value() + 1)
        ctx.timer_service().register_event_time_timer(2**62)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect({"k": ctx.get_current_key(), "n": self.count.value()})


def test_spark_subtasks_record_the_harness_sequence(
    spark: Any, tmp_path: Path, make_recorder: Callable[[], LifecycleRecorder]
) -> None:
    on_spark = make_recorder()
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=str(tmp_path), plugins=[on_spark]
    )
    rows = [{"k": i % 7, "v": i} for i in range(100)]
    counts = env.from_collection(rows, batch_size=10).key_by("k").process(Count(), name="count")
    table = counts.execute_and_collect("recorded")
    assert sorted(table.column("n").to_pylist()) == sorted(
        [len([r for r in rows if r["k"] == k]) for k in range(7)]
    )
    keyed_chain = "count -> collect"
    assert set(on_spark.by_task) == {
        "source:collection#0",
        "source:collection#1",
        f"{keyed_chain}#0",
        f"{keyed_chain}#1",
    }

    in_harness = make_recorder()
    harness = OneInputHarness(
        KeyedProcessOperator(Count(), key_column="k", name="count"),
        TwoPhaseCommitSinkOperator(CollectSink("collect"), name="collect"),
        plugins=[in_harness],
        task_name=keyed_chain,
    )
    harness.process_records(rows[:1])
    harness.complete(checkpoint_id=1)
    expected = in_harness.calls(exclude=PER_BATCH)
    assert expected[0] == ("state", "DEPLOYING") and expected[-1] == ("state", "FINISHED")
    for subtask in (0, 1):
        assert on_spark.calls(f"{keyed_chain}#{subtask}", exclude=PER_BATCH) == expected


class RowTally:
    """Counts the rows each operator of each subtask is handed, on the workers, and
    reports them to its driver-side object through the report hooks."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.merged: list[str] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"rows": {}, "merged": []}

    @hookimpl
    def flintlock_operator_process_batch(
        self, operator: Any, task: Any, batch: pa.RecordBatch, input_index: int
    ) -> None:
        label = f"{task.key} {operator.name}"
        self.rows[label] = self.rows.get(label, 0) + batch.num_rows

    @hookimpl
    def flintlock_report_to_driver(self, task: Any) -> dict[str, int] | None:
        mine = {label: n for label, n in self.rows.items() if label.startswith(f"{task.key} ")}
        return mine or None

    @hookimpl
    def flintlock_merge_report(self, task: str, report: dict[str, int]) -> None:
        self.merged.append(task)
        for label, n in report.items():
            self.rows[label] = self.rows.get(label, 0) + n


def test_a_plugin_reports_what_it_saw_on_the_workers_to_its_driver_side_object(
    spark: Any, tmp_path: Path
) -> None:
    tally = RowTally()
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=str(tmp_path), plugins=[tally]
    )
    rows = [{"k": i % 7, "v": i} for i in range(100)]
    env.from_collection(rows, batch_size=10).key_by("k").process(
        Count(), name="count"
    ).execute_and_collect("tallied")
    counted = {label: n for label, n in tally.rows.items() if label.endswith(" count")}
    assert sorted(counted) == ["count -> collect#0 count", "count -> collect#1 count"]
    assert sum(counted.values()) == len(rows)  # every row, once, from the workers
    assert sorted(tally.merged) == ["count -> collect#0", "count -> collect#1"]


def test_a_failure_on_spark_names_task_subtask_operator_and_phase(
    spark: Any, tmp_path: Path
) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))

    def explode(row: dict[str, Any]) -> dict[str, Any]:
        if row["v"] == 13:
            raise KeyError("customer_id")
        return row

    env.from_collection([{"v": i} for i in range(20)], batch_size=5).map(
        explode, name="enrich"
    ).rebalance().map(lambda r: r, name="after").sink_to(CollectSink())
    with pytest.raises(LifecycleError) as caught:
        env.execute("fails")
    message = str(caught.value)
    assert "operator 'enrich' failed in process_batch" in message
    assert "task: source 'source:collection -> enrich', subtask" in message
    assert "caused by: KeyError: 'customer_id'" in message


class Join(CoProcessFunction):
    """Emits each order with the latest name of its customer (state per customer)."""

    def open(self) -> None:
        self.name = self.runtime_context.get_state(ValueStateDescriptor("name", pa.string()))

    def process_element1(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        out.collect({"order": value["order"], "name": self.name.value()})

    def process_element2(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.name.update(value["name"])


def test_two_input_subtasks_record_the_harness_sequence_up_to_input_order(
    spark: Any, tmp_path: Path, make_recorder: Callable[[], LifecycleRecorder]
) -> None:
    on_spark = make_recorder()
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=str(tmp_path), plugins=[on_spark]
    )
    orders = env.from_collection([{"order": i, "c": i % 5} for i in range(40)], batch_size=8)
    names = env.from_collection([{"c": c, "name": f"n{c}"} for c in range(5)])
    joined = orders.key_by("c").connect(names.key_by("c")).process(Join(), name="join")
    assert joined.execute_and_collect("two-input").num_rows == 40
    chain = "join -> collect"

    def harness_calls(first_ended: int) -> list[tuple[Any, ...]]:
        recorder = make_recorder()
        harness = TwoInputHarness(
            CoProcessOperator(Join(), key_columns=("c", "c"), name="join"),
            TwoPhaseCommitSinkOperator(CollectSink("collect"), name="collect"),
            plugins=[recorder],
            task_name=chain,
            input_channels={1: 2, 2: 2},  # two upstream subtasks per input, as on Spark
        )
        harness.end_input(first_ended)
        harness.end_input(3 - first_ended)
        harness.complete(checkpoint_id=1)
        return recorder.calls(exclude=PER_BATCH)

    either_order = [harness_calls(1), harness_calls(2)]
    assert either_order[0] != either_order[1]  # the order in which inputs end is visible
    for subtask in (0, 1):
        assert on_spark.calls(f"{chain}#{subtask}", exclude=PER_BATCH) in either_order
