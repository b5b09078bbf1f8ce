"""Side outputs: ctx.output(tag, row) from process, keyed process and co-process
functions in the harness; their edges and watermark statuses on the message protocol.
On Spark: tests/spark/test_side_outputs_and_idleness.py."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from side_output_functions import BIG, ODD, Split

from flintlock import (
    CoProcessFunction,
    GraphError,
    OutputTag,
    SideOutputError,
    StreamExecutionEnvironment,
)
from flintlock.operators.process import CoProcessOperator, ProcessOperator
from flintlock.testing import OneInputHarness, TwoInputHarness


def test_process_function_side_outputs_in_the_harness() -> None:
    harness = OneInputHarness(ProcessOperator(Split(), name="split"))
    harness.process_records([{"v": v} for v in (1, 2, 3, 104, 105)])
    harness.process_records([{"v": 7}])
    harness.complete()
    assert [r["v"] for r in harness.output_rows()] == [2, 104]
    assert [r["v"] for r in harness.side_output_rows(ODD)] == [1, 3, 105, 7]
    assert harness.side_output_rows(BIG) == [
        {"v": 104, "note": "big"},
        {"v": 105, "note": "big"},
    ]
    assert harness.side_output(ODD).schema == ODD.schema


def test_co_process_side_output_and_misuse_errors() -> None:
    class Tagging(CoProcessFunction):
        def process_element1(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            ctx.output(ODD, {"v": value["v"]})

        def process_element2(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            ctx.output("odd", {"v": value["v"]})  # not an OutputTag

    harness = TwoInputHarness(CoProcessOperator(Tagging(), name="co"))
    harness.process_records([{"v": 1}], input_index=1)
    assert harness.side_output_rows(ODD) == [{"v": 1}]
    with pytest.raises(Exception) as caught:
        harness.process_records([{"v": 2}], input_index=2)
    assert isinstance(caught.value.__cause__, SideOutputError)
    assert "operator 'co': ctx.output: a side output is named by an OutputTag" in str(
        caught.value.__cause__
    )
    with pytest.raises(SideOutputError, match="non-empty str"):
        OutputTag("")


def test_side_output_of_a_union_or_twice_on_one_input_is_refused() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    split = env.from_collection([{"v": 1}]).process(Split(), name="split")
    with pytest.raises(GraphError, match="needs the stream of one operator"):
        split.union(split).get_side_output(ODD)
    with pytest.raises(GraphError, match="has no operator of its own"):
        split.get_side_output(ODD).set_parallelism(2)


def test_side_edges_and_watermark_status_ride_the_same_channels() -> None:
    from flintlock.core.events import CheckpointBarrier, DataEvent, WatermarkStatusEvent
    from flintlock.core.exchange.reader import MessageReader
    from flintlock.core.exchange.writer import MessageWriter
    from flintlock.core.plan.execution import ExecutionPlan
    from flintlock.core.plan.graph import InputEdge, Transformation, build_job_graph
    from flintlock.core.sources.source import SourceOperator

    def make(tid: int, name: str, inputs: list[InputEdge]) -> Transformation:
        return Transformation(
            tid, name, lambda: SourceOperator(None), 1, inputs, is_source=not inputs
        )  # type: ignore[arg-type]

    graph = build_job_graph(
        [
            make(0, "split", []),
            make(1, "main", [InputEdge(0, 1)]),  # forward: chained to split
            make(2, "odd-rows", [InputEdge(0, 1, None, "odd")]),  # a side output: never chained
        ]
    )
    assert [v.name for v in graph.vertices.values()] == ["split -> main", "odd-rows"]
    assert [e.side for e in graph.vertices[0].outputs] == [("split", "odd")]
    plan = ExecutionPlan("job", "run", 1, CheckpointBarrier(1), "/tmp", 128, "hashmap", graph)
    writer = MessageWriter(plan, graph.vertices[0], 0)
    writer.emit_batch(pa.record_batch({"v": [2]}))  # the main output has no edge out of the task
    writer.emit_side("split", "odd", pa.record_batch({"v": [1, 3]}))
    writer.emit_side("split", "nobody-reads-this", pa.record_batch({"v": [5]}))  # dropped
    writer.emit_watermark_status(True)
    messages = writer.buffer.take()
    reader = MessageReader(
        plan, graph.vertices[1], 0, iter([messages]), MessageWriter(plan, graph.vertices[1], 0)
    )
    events = list(reader.events())
    assert [type(e) for e in events] == [DataEvent, WatermarkStatusEvent]
    assert events[0].batch.column("v").to_pylist() == [1, 3]  # type: ignore[union-attr]
    assert events[1].idle  # type: ignore[union-attr]
