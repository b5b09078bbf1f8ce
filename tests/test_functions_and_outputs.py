"""User functions per record and per batch, output schemas, and emission after finish."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flintlock import (
    EmitAfterFinishError,
    FlatMapFunction,
    LifecycleError,
    MapFunction,
    OneInputStreamOperator,
    SchemaMismatchError,
    SinkFunction,
)
from flintlock.operators.basic import FilterOperator, FlatMapOperator, MapOperator
from flintlock.operators.sink import SinkOperator
from flintlock.testing import OneInputHarness


def test_per_record_and_per_batch_give_the_same_rows() -> None:
    class PerRecord(MapFunction):
        def map(self, value):  # type: ignore[no-untyped-def]
            return {"v": value["v"] * 2}

    class PerBatch(MapFunction):
        def map_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
            return pa.record_batch({"v": pc.multiply(batch.column("v"), 2)})

    outputs = []
    for function in (PerRecord(), PerBatch()):
        harness = OneInputHarness(MapOperator(function))
        harness.process_records([{"v": 1}, {"v": 2}])
        harness.complete()
        outputs.append(harness.output())
    assert outputs[0].equals(outputs[1])
    assert outputs[0].column("v").to_pylist() == [2, 4]


def test_a_later_row_that_does_not_fit_names_operator_and_column() -> None:
    harness = OneInputHarness(MapOperator(lambda r: {"v": r["v"]}, name="copy"))
    harness.process_records([{"v": 1}])
    with pytest.raises(LifecycleError) as caught:
        harness.process_records([{"v": "one"}])
    cause = caught.value.__cause__
    assert isinstance(cause, SchemaMismatchError)
    assert "operator 'copy': column 'v' does not fit its type int64" in str(cause)


def test_a_row_with_a_missing_column_is_an_error() -> None:
    harness = OneInputHarness(FlatMapOperator(lambda r: [{"a": 1}, {"b": 2}], name="explode"))
    with pytest.raises(LifecycleError) as caught:
        harness.process_records([{"v": 1}])
    message = str(caught.value.__cause__)
    assert "operator 'explode'" in message and "missing column(s) ['a']" in message


def test_a_declared_output_schema_fixes_types() -> None:
    class Halve(MapFunction):
        output_schema = pa.schema([("half", pa.float32())])

        def map(self, value):  # type: ignore[no-untyped-def]
            return {"half": value["v"] / 2}

    harness = OneInputHarness(MapOperator(Halve()))
    harness.process_records([{"v": 3}])
    harness.complete()
    assert harness.output().schema == pa.schema([("half", pa.float32())])


def test_filter_and_flat_map_per_record_and_per_batch() -> None:
    class Words(FlatMapFunction):
        def flat_map(self, value):  # type: ignore[no-untyped-def]
            return ({"w": w} for w in value["line"].split())

    harness = OneInputHarness(
        FlatMapOperator(Words()),
        FilterOperator(lambda b: pc.not_equal(b.column("w"), "b"), batch=True),
    )
    harness.process_records([{"line": "a b c"}, {"line": "b d"}])
    harness.complete()
    assert harness.output().column("w").to_pylist() == ["a", "c", "d"]


def test_emitting_after_finish_raises() -> None:
    class Sloppy(OneInputStreamOperator):
        def process_batch(self, batch: pa.RecordBatch) -> None:
            self.output.emit(batch)

        def finish(self) -> None:
            self.last = pa.record_batch({"v": [0]})

        def snapshot_state(self, checkpoint_id: int) -> None:
            self.output.emit(self.last)  # too late: finish already returned

    harness = OneInputHarness(Sloppy("sloppy"))
    with pytest.raises(LifecycleError) as caught:
        harness.complete()
    assert isinstance(caught.value.__cause__, EmitAfterFinishError)
    assert (caught.value.operator, caught.value.phase) == ("sloppy", "snapshot")


def test_sink_function_finish_flushes_the_last_rows() -> None:
    class Buffered(SinkFunction):
        def __init__(self) -> None:
            self.buffer: list[dict[str, int]] = []
            self.written: list[dict[str, int]] = []

        def invoke(self, value):  # type: ignore[no-untyped-def]
            self.buffer.append(value)
            if len(self.buffer) == 2:
                self.written += self.buffer
                self.buffer = []

        def finish(self) -> None:
            self.written += self.buffer
            self.buffer = []

    sink = Buffered()
    harness = OneInputHarness(SinkOperator(sink))
    harness.process_records([{"v": 1}, {"v": 2}, {"v": 3}])
    assert sink.written == [{"v": 1}, {"v": 2}]
    harness.complete()
    assert sink.written == [{"v": 1}, {"v": 2}, {"v": 3}]


def test_epoch_end_does_not_finish_a_sink() -> None:
    class Buffered(SinkFunction):
        finished = False

        def invoke(self, value):  # type: ignore[no-untyped-def]
            pass

        def finish(self) -> None:
            self.finished = True

    sink = Buffered()
    harness = OneInputHarness(SinkOperator(sink))
    harness.process_records([{"v": 1}])
    harness.checkpoint(1)
    assert not sink.finished
