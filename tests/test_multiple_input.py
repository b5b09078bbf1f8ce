"""The multiple-input operator and task type (Flink's MultipleInputStreamOperator) in the
harness: three exchanged inputs, per-input end_input in the order the inputs end, finish
once after the last, event time the minimum over the inputs — as exact call sequences."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from flintlock import MultipleInputStreamOperator, OneInputStreamOperator, Watermark
from flintlock.testing import LifecycleRecorder, MultipleInputHarness

MAX = 2**63 - 1


class Tagging(MultipleInputStreamOperator):
    """Tags each row with the input it came in on."""

    def __init__(self) -> None:
        super().__init__(3, name="three")

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> None:
        tags = pa.array([input_index] * batch.num_rows, pa.int64())
        self.output.emit(pa.record_batch({"x": batch.column("x"), "input": tags}))


class Watermarks(OneInputStreamOperator):
    """Keeps the watermarks that reach it."""

    def __init__(self) -> None:
        super().__init__("after")
        self.seen: list[int] = []

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.output.emit(batch)

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        self.seen.append(watermark.timestamp)
        super().process_watermark(watermark, input_index)


def xs(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"x": pa.array(values, pa.int64())})


def test_three_inputs_end_one_by_one_and_finish_comes_once_after_the_last(
    make_recorder: Any,
) -> None:
    recorder: LifecycleRecorder = make_recorder()
    after = Watermarks()
    harness = MultipleInputHarness(Tagging(), after, plugins=[recorder])
    harness.process_batch(xs(1), input_index=2)
    harness.process_watermark(10, input_index=1)
    harness.process_watermark(30, input_index=2)
    harness.process_watermark(20, input_index=3)
    harness.process_batch(xs(2, 3), input_index=3)
    harness.process_watermark(40, input_index=1)
    harness.end_input(2)
    harness.process_batch(xs(4), input_index=1)
    harness.end_input(3)
    harness.end_input(1)
    harness.checkpoint(1)
    calls = recorder.calls(exclude={"state", "operator_setup", "operator_initialize_state"})
    run = calls[calls.index(("task", "run")) : calls.index(("task", "snapshot"))]
    assert run == [
        ("task", "run"),
        ("operator_process_batch", "three"),  # input 2
        ("operator_process_batch", "after"),
        ("operator_process_watermark", "three", 10),  # inputs 1, 2, 3
        ("operator_process_watermark", "three", 30),
        ("operator_process_watermark", "three", 20),
        ("operator_process_watermark", "after", 10),  # min over the three: 10
        ("operator_process_batch", "three"),
        ("operator_process_batch", "after"),
        ("operator_process_watermark", "three", 40),
        ("operator_process_watermark", "after", 20),  # min is now input 3's 20
        ("operator_process_watermark", "three", MAX),
        ("operator_end_input", "three", 2),
        ("operator_process_batch", "three"),
        ("operator_process_batch", "after"),
        ("operator_process_watermark", "three", MAX),
        ("operator_process_watermark", "after", 40),  # only input 1 left: 40
        ("operator_end_input", "three", 3),
        ("operator_process_watermark", "three", MAX),
        ("operator_process_watermark", "after", MAX),
        ("operator_end_input", "three", 1),
        ("task", "finish"),
        ("operator_finish", "three"),
        ("operator_end_input", "after", 1),
        ("operator_finish", "after"),
    ]
    assert after.seen == [10, 20, 40, MAX]
    rows = harness.output_rows()
    assert sorted((r["x"], r["input"]) for r in rows) == [(1, 2), (2, 3), (3, 3), (4, 1)]


def test_a_multiple_input_operator_needs_at_least_one_input() -> None:
    with pytest.raises(ValueError, match="num_inputs >= 1"):
        MultipleInputStreamOperator(0)
