"""Sources chained into a multiple-input task (Flink's FLIP-182) in the harness: a
three-input operator fed by two chained sources and one exchanged input, as exact call
sequences — the sources read first in turn, per-input end_input in the order the inputs
end, finish once (sources first), event time the minimum over the inputs — and a chained
source that reads on from its snapshot in the next epoch."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from test_multiple_input import Tagging, Watermarks

from flintlock import (
    LifecycleError,
    MultipleInputStreamOperator,
    OneInputStreamOperator,
    SourceOperator,
    WatermarkStrategy,
)
from flintlock.core.sources.sequence import SequenceSource
from flintlock.core.sources.source import CollectionSource, SourceEpoch
from flintlock.testing import LifecycleRecorder, MultipleInputHarness

MAX = 2**63 - 1


def timed(name: str, rows: list[dict[str, int]]) -> SourceOperator:
    """A bounded source of ``rows`` (one batch per row), watermarks from column ``t``."""
    strategy = WatermarkStrategy.for_monotonous_timestamps("t")
    return SourceOperator(CollectionSource(rows, batch_size=1), strategy, name=name)


def test_two_chained_sources_and_an_exchanged_input_in_their_exact_order(
    make_recorder: Any,
) -> None:
    recorder: LifecycleRecorder = make_recorder()
    left = timed("left", [{"x": 1, "t": 10}, {"x": 2, "t": 20}])
    right = timed("right", [{"x": 3, "t": 15}])
    after = Watermarks()
    harness = MultipleInputHarness(
        Tagging(), after, chained_sources={1: left, 3: right}, plugins=[recorder]
    )
    harness.process_batch(pa.record_batch({"x": pa.array([4]), "t": pa.array([5])}), 2)
    harness.process_watermark(12, input_index=2)
    harness.end_input(2)
    snapshot = harness.checkpoint(1)

    calls = recorder.calls(exclude={"state"})
    assert [c for c in calls if c[0] in ("operator_setup", "operator_open")] == [
        ("operator_setup", "left"),  # the sources are upstream of the head: first...
        ("operator_setup", "right"),
        ("operator_setup", "three"),
        ("operator_setup", "after"),
        ("operator_open", "after"),  # ...and opened last, when all they feed is open
        ("operator_open", "three"),
        ("operator_open", "right"),
        ("operator_open", "left"),
    ]
    run = calls[calls.index(("task", "run")) : calls.index(("task", "snapshot"))]
    assert run == [
        ("task", "run"),
        ("operator_process_batch", "three"),  # left's first row, into input 1
        ("operator_process_batch", "after"),
        ("operator_process_watermark", "three", 9),  # left's watermark (t - 1), input 1
        ("operator_process_batch", "three"),  # right's row, into input 3
        ("operator_process_batch", "after"),
        ("operator_process_watermark", "three", 14),
        ("operator_process_batch", "three"),  # left's second row
        ("operator_process_batch", "after"),
        ("operator_process_watermark", "three", 19),
        ("operator_process_watermark", "right", MAX),  # right read to its end first
        ("operator_process_watermark", "three", MAX),
        ("operator_end_input", "three", 3),
        ("operator_process_watermark", "left", MAX),
        ("operator_process_watermark", "three", MAX),
        ("operator_end_input", "three", 1),
        ("operator_process_batch", "three"),  # then the exchanged input 2
        ("operator_process_batch", "after"),
        ("operator_process_watermark", "three", 12),
        ("operator_process_watermark", "after", 12),  # min: input 2 held event time back
        ("operator_process_watermark", "three", MAX),
        ("operator_process_watermark", "after", MAX),
        ("operator_end_input", "three", 2),
        ("task", "finish"),
        ("operator_finish", "left"),  # finish first to last: the sources first, once
        ("operator_finish", "right"),
        ("operator_finish", "three"),
        ("operator_end_input", "after", 1),
        ("operator_finish", "after"),
    ]
    closing = calls[calls.index(("task", "snapshot")) :]
    assert [c for c in closing if c[0] in ("operator_snapshot_state", "operator_close")] == [
        ("operator_snapshot_state", "after", 1),
        ("operator_snapshot_state", "three", 1),
        ("operator_snapshot_state", "right", 1),
        ("operator_snapshot_state", "left", 1),
        ("operator_close", "left"),
        ("operator_close", "right"),
        ("operator_close", "three"),
        ("operator_close", "after"),
    ]
    assert after.seen == [12, MAX]
    assert [(r["x"], r["input"]) for r in harness.output_rows()] == [(1, 1), (3, 3), (2, 1), (4, 2)]
    assert sorted(snapshot.operators) == ["after", "left", "right", "three"]
    assert snapshot.ended_inputs == [1, 2, 3]
    acknowledgement = harness.acknowledgement
    assert acknowledgement is not None and acknowledgement.records_in == 4  # 2 + 1 + 1
    metrics = acknowledgement.metrics["operators"]
    counted = {name: (m["numRecordsIn"], m["numRecordsOut"]) for name, m in metrics.items()}
    assert counted == {"left": (2, 2), "right": (1, 1), "three": (4, 4), "after": (4, 4)}


class CountPerInput(MultipleInputStreamOperator):
    """Emits, per batch, the input it came in on and its row count."""

    def __init__(self) -> None:
        super().__init__(3, name="count")

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> None:
        self.output.emit(pa.record_batch({"input": [input_index], "rows": [batch.num_rows]}))


def sequence_epoch(split: list[int], ends: bool) -> SourceOperator:
    """An unbounded sequence (ids 0..9, event time = id) read one split per epoch."""
    source = SourceOperator(
        SequenceSource(end=10, rows_per_epoch=5),
        WatermarkStrategy.for_monotonous_timestamps("event_time"),
        name="sequence",
    )
    source.epoch = SourceEpoch([split], ends)
    return source


def test_a_chained_source_reads_on_from_its_snapshot_in_the_next_epoch(
    make_recorder: Any,
) -> None:
    first, second = make_recorder(), make_recorder()
    after = Watermarks()
    epoch1 = MultipleInputHarness(
        CountPerInput(),
        after,
        chained_sources={1: sequence_epoch([0, 5, 0], False), 3: [{"n": 1}, {"n": 2}]},
        plugins=[first],
    )
    epoch1.process_watermark(100, input_index=2)
    epoch1.end_input(2)
    snapshot = epoch1.checkpoint(1)
    assert ("task", "finish") not in first.calls()  # the sequence reads on
    assert snapshot.ended_inputs == [2, 3]
    assert after.seen == [3]  # min over the inputs: the sequence's 3 (ids 0..4), not 100
    assert sorted((r["input"], r["rows"]) for r in epoch1.output_rows()) == [(1, 5), (3, 2)]

    after2 = Watermarks()
    epoch2 = MultipleInputHarness(
        CountPerInput(),
        after2,
        chained_sources={1: sequence_epoch([5, 10, 0], True), 3: [{"n": 1}, {"n": 2}]},
        restore_from=snapshot,
        plugins=[second],
    )
    epoch2.complete(2)
    calls = second.calls(exclude={"state"})
    assert [c for c in calls if c[0] == "operator_end_input"] == [
        ("operator_end_input", "count", 1),  # inputs 2 and 3 ended in epoch 1: not again
        ("operator_end_input", "after", 1),
    ]
    assert calls.count(("operator_finish", "count")) == 1
    assert [(r["input"], r["rows"]) for r in epoch2.output_rows()] == [(1, 5)]  # ids 5..9
    # the sequence's 8 waits for input 2, ended in epoch 1, whose MAX comes after it
    assert after2.seen == [MAX]


class Passthrough(OneInputStreamOperator):
    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.output.emit(batch)


def test_chained_sources_that_cannot_be_read_fail_naming_the_operator() -> None:
    with pytest.raises(LifecycleError, match=r"(?s)phase task_init.*every input is a chained"):
        MultipleInputHarness(
            CountPerInput(), chained_sources={1: [{"n": 1}], 2: [{"n": 1}], 3: [{"n": 1}]}
        ).complete(1)
    with pytest.raises(LifecycleError, match=r"ChannelError: .*inputs 1..3 of 'count'.*input 4"):
        MultipleInputHarness(CountPerInput(), chained_sources={4: [{"n": 1}]}).complete(1)
    with pytest.raises(LifecycleError, match=r"ChainError: .*only into a multiple-input head"):
        MultipleInputHarness(
            Passthrough("one"), chained_sources={1: [{"n": 1}]}, task_type="one-input"
        ).complete(1)
