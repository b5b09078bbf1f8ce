"""User functions per record and per batch, output schemas, and emission after finish."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flintlock import (
    EmitAfterFinishError,
    FlatMapFunction,
    LifecycleError,
    MapFunction,
    OneInputStreamOperator,
    ProcessFunction,
    SchemaMismatchError,
    SinkFunction,
)
from flintlock.core.runtime.row_batches import RowBatchBuilder
from flintlock.operators.basic import FilterOperator, FlatMapOperator, MapOperator
from flintlock.operators.process import ProcessOperator
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


DECLARED = pa.schema([("a", pa.int64()), ("b", pa.string())])


@pytest.mark.parametrize(
    ("row", "detail"),
    [
        ({"a": 1, "b": "x", "c": 3}, "unexpected column(s) ['c']"),
        ({"a": 1}, "missing column(s) ['b']"),
        ({"a": 1, "z": "x"}, "missing column(s) ['b']"),
        (["a", "b"], "produced list"),
    ],
)
def test_declared_output_rows_that_do_not_fit_name_the_operator(row: object, detail: str) -> None:
    class Emit(ProcessFunction):
        output_schema = DECLARED

        def process_element(self, value, ctx, out):  # type: ignore[no-untyped-def]
            out.collect({"a": 1, "b": "ok"})
            out.collect(row)

    harness = OneInputHarness(ProcessOperator(Emit(), name="emit"))
    with pytest.raises(LifecycleError) as caught:
        harness.process_records([{"v": 1}])
    message = str(caught.value.__cause__)
    assert isinstance(caught.value.__cause__, SchemaMismatchError)
    assert "operator 'emit'" in message and detail in message


def test_declared_output_batches_equal_from_pylist() -> None:
    schema = pa.schema(
        [
            ("n", pa.int32()),
            ("s", pa.string()),
            ("l", pa.list_(pa.int64())),
            ("t", pa.struct([("x", pa.float64())])),
        ]
    )
    rows = [
        {"n": 1, "s": "a", "l": [1, 2], "t": {"x": 0.5}},
        {"t": None, "l": None, "s": None, "n": None},  # another key order, nulls
        {"n": -7, "s": "ü", "l": [], "t": {"x": 2.0}},
    ]
    builder = RowBatchBuilder("emit", schema)
    assert builder.build(rows).equals(pa.RecordBatch.from_pylist(rows, schema=schema))


def test_declared_rows_go_on_as_they_are_only_where_the_batch_would_not_change_them() -> None:
    schema = pa.schema([("x", pa.float64()), ("n", pa.int32())])
    collected: list[dict[str, object]] = []

    class Emit(ProcessFunction):
        output_schema = schema

        def process_element(self, value, ctx, out):  # type: ignore[no-untyped-def]
            row = cases[value["case"]]
            collected.append(row)
            out.collect(row)

    def show(row):  # type: ignore[no-untyped-def]
        same = any(row is emitted for emitted in collected)
        return {"seen": f"{row['x']!r},{row['n']!r},{'same' if same else 'rebuilt'}"}

    cases = [
        {"x": 1.5, "n": 3},  # already float64 / int32 values: taken as they are
        {"x": 2, "n": 4},  # an int in a float64 column: cast, the next function sees 2.0
        {"x": 1.0, "n": np.int64(5)},  # a numpy int: the next function sees a Python int
        {"n": None, "x": None},  # nulls in nullable columns, another key order
    ]
    harness = OneInputHarness(ProcessOperator(Emit(), name="emit"), MapOperator(show))
    for case in range(len(cases)):
        harness.process_records([{"case": case}])  # one batch, one flush each
    harness.complete()
    assert harness.output().column("seen").to_pylist() == [
        "1.5,3,same",
        "2.0,4,rebuilt",
        "1.0,5,rebuilt",
        "None,None,same",
    ]

    out_of_range = OneInputHarness(ProcessOperator(Emit(), name="emit"), MapOperator(show))
    cases.append({"x": 0.5, "n": 2**40})
    with pytest.raises(LifecycleError) as caught:
        out_of_range.process_records([{"case": 4}])
    assert "operator 'emit': column 'n' does not fit its type int32" in str(caught.value.__cause__)
