"""A user's mistakes are flintlock errors that name where they went wrong (no Spark):
bad window sizes at definition, a key_by whose column a schemaless map did not make, a
failing task_cleanup, state of the wrong type at update."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from lifecycle_ops import Boom, Passthrough, batch

from flintlock import (
    FlintlockError,
    KeyedProcessFunction,
    LifecycleError,
    ListStateDescriptor,
    MapStateDescriptor,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
    hookimpl,
)
from flintlock.core.api.keys import ColumnKey, ColumnsKey
from flintlock.core.api.window_assigners import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from flintlock.core.errors import KeyColumnError, operator_tag
from flintlock.core.exchange.partitioners import BatchSplitter, Partitioner, hash_by
from flintlock.errors import GraphError, JobControlError, StateTypeError, WindowDefinitionError
from flintlock.operators.process import KeyedProcessOperator
from flintlock.plugins.one_input_task import OneInputStreamTask
from flintlock.testing import LifecycleRecorder, OneInputHarness


@pytest.mark.parametrize(
    ("define", "words"),
    [
        (lambda: TumblingEventTimeWindows.of(0), "tumbling window size must be a positive int"),
        (lambda: TumblingEventTimeWindows.of(-5), "not -5"),
        (lambda: TumblingEventTimeWindows.of("5s"), "not '5s'"),  # type: ignore[arg-type]
        (lambda: TumblingEventTimeWindows.of(1.5), "not 1.5"),  # type: ignore[arg-type]
        (lambda: TumblingEventTimeWindows.of(True), "not True"),
        (lambda: TumblingProcessingTimeWindows.of(0), "tumbling window size"),
        (lambda: TumblingEventTimeWindows.of(10, 10), "|offset| < size (10), not 10"),
        (lambda: SlidingEventTimeWindows.of(10, 0), "sliding window slide must be a positive"),
        (lambda: SlidingEventTimeWindows.of(-1, 5), "sliding window size must be a positive"),
        (lambda: SlidingEventTimeWindows.of(10, 5, 7), "|offset| < slide (5), not 7"),
        (lambda: EventTimeSessionWindows.with_gap(None), "session gap must be a positive"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_window_is_refused_where_it_is_defined(define: Callable[[], Any], words: str) -> None:
    with pytest.raises(WindowDefinitionError) as caught:
        define()
    assert isinstance(caught.value, FlintlockError)
    assert isinstance(caught.value, ValueError)  # as before, for code that caught that
    assert words in str(caught.value)


def test_a_good_window_still_defines() -> None:
    assert TumblingEventTimeWindows.of(10, -3).offset == -3
    assert SlidingEventTimeWindows.of(10, 5, 4).slide == 5


def split(key: Any, batch: pa.RecordBatch, parallelism: int) -> list[tuple[int, int]]:
    splitter = BatchSplitter(Partitioner("hash", key), 0, parallelism, 128)
    return [(target, part.num_rows) for target, part in splitter.split(batch)]


@pytest.mark.parametrize("parallelism", [1, 3])
def test_a_key_column_missing_from_the_rows_names_the_key_by(parallelism: int) -> None:
    rows = pa.record_batch({"x": [1, 2]})  # what a schemaless map returned
    with pytest.raises(KeyColumnError) as caught:
        split(ColumnKey("user"), rows, parallelism)
    message = str(caught.value)
    assert message.startswith("key_by('user'): the rows reaching it have no column 'user'")
    assert "(their columns: x)" in message and "output_schema" in message
    assert operator_tag(caught.value) == ("key_by('user')", "routing its rows to subtasks")
    with pytest.raises(KeyColumnError, match=r"key_by\(\['x', 'day'\]\): .* no column 'day'"):
        split(ColumnsKey(["x", "day"]), rows, parallelism)


def test_a_key_by_whose_column_is_there_routes_every_row() -> None:
    rows = pa.record_batch({"user": list(range(100))})
    assert sum(count for _, count in split(ColumnKey("user"), rows, 3)) == 100


def test_a_key_by_after_a_schemaless_map_fails_naming_the_key_by_not_the_map() -> None:
    harness = OneInputHarness(Passthrough("renames"))
    splitter = BatchSplitter(hash_by("user"), 0, 2, 128)  # the exchange after the chain
    keep = harness.writer.emit_batch

    def emit_through_exchange(out: pa.RecordBatch) -> None:
        for _, part in splitter.split(out):
            keep(part)

    harness.writer.emit_batch = emit_through_exchange  # type: ignore[method-assign]
    with pytest.raises(LifecycleError) as caught:
        harness.process_batch(pa.record_batch({"x": [1]}))
    error = caught.value
    assert (error.operator, error.phase) == ("key_by('user')", "run")
    assert str(error).startswith("operator 'key_by('user')' failed in routing its rows")
    assert "caused by: KeyColumnError: key_by('user'): the rows reaching it" in str(error)


class FailingCleanupTask(OneInputStreamTask):
    """A task type whose own cleanup step raises."""

    task_type = "failing-cleanup"

    def task_cleanup(self) -> None:
        super().task_cleanup()
        raise Boom("could not release the input channels")


class FailingCleanupPlugin:
    @hookimpl
    def flintlock_register_task_types(self, register: Callable[[str, Any], None]) -> None:
        register("failing-cleanup", FailingCleanupTask)


def test_a_failing_task_cleanup_names_that_phase(recorder: LifecycleRecorder) -> None:
    harness = OneInputHarness(
        Passthrough("a"),
        plugins=[FailingCleanupPlugin(), recorder],
        task_type="failing-cleanup",
    )
    harness.process_batch(batch(1))
    with pytest.raises(LifecycleError) as caught:
        harness.complete()
    error = caught.value
    assert error.phase == "task_cleanup" and error.operator is None
    assert str(error).startswith("task failed in task_cleanup")
    assert "phase task_cleanup" in str(error)
    assert "caused by: Boom: could not release the input channels" in str(error)
    calls = recorder.calls(exclude={"state"})
    assert calls[calls.index(("task", "close")) :] == [
        ("task", "close"),
        ("operator_close", "a"),
        ("task", "timer_shutdown"),
        ("task", "task_cleanup"),
        ("task", "common_cleanup"),
    ]


def test_a_failing_close_is_still_named_close() -> None:
    harness = OneInputHarness(Passthrough("a", "close"))
    harness.process_batch(batch(1))
    with pytest.raises(LifecycleError) as caught:
        harness.complete()
    assert (caught.value.phase, caught.value.operator) == ("close", "a")


GIVEN: list[Any] = [0, "12", 2**63, [1], "a", 7, "key", 3, 2, "x", 2**63 - 1, 5]
"""The values the rows' ``case`` picks (a column cannot hold them all)."""


class StoresWhatItIsGiven(KeyedProcessFunction):
    """Writes the value GIVEN[case] into the state kind named by the row's ``kind``."""

    def open(self) -> None:
        get = self.runtime_context
        self.value = get.get_state(ValueStateDescriptor("total", pa.int64()))
        self.list = get.get_list_state(ListStateDescriptor("names", pa.string()))
        self.map = get.get_map_state(MapStateDescriptor("seen", pa.string(), pa.float64()))

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        kind, v = value["kind"], GIVEN[value["case"]]
        if kind == "value":
            self.value.update(v)
        elif kind == "list":
            self.list.add_all(["ok", v])
        elif kind == "map-key":
            self.map.put(v, 1.0)
        else:
            self.map.put("k", v)
        out.collect({"k": value["k"]})


def store() -> KeyedProcessOperator:
    return KeyedProcessOperator(StoresWhatItIsGiven(), key_column="k", name="store")


@pytest.mark.parametrize("backend", ["hashmap", "sqlite", "key-group-dicts"])
@pytest.mark.parametrize(
    ("kind", "good", "bad", "words"),
    [
        ("value", 0, 1, "value state 'total' (declared int64) cannot hold '12' (str)"),
        ("value", 0, 2, "value state 'total' (declared int64) cannot hold 9223372036854775808"),
        ("value", 0, 3, "value state 'total' (declared int64) cannot hold [1] (list)"),
        ("list", 4, 5, "list state 'names' (declared string) cannot hold 7 (int)"),
        ("map-key", 6, 7, "the keys of map state 'seen' (declared string) cannot hold 3 (int)"),
        ("map-value", 8, 9, "the values of map state 'seen' (declared double) cannot hold 'x'"),
    ],
)
def test_state_of_the_wrong_type_is_refused_at_the_update(
    backend: str, kind: str, good: int, bad: int, words: str
) -> None:
    harness = OneInputHarness(store(), state_backend=backend)
    harness.process_records([{"k": 1, "kind": kind, "case": good}])
    with pytest.raises(LifecycleError) as caught:
        harness.process_records([{"k": 1, "kind": kind, "case": bad}])
    error = caught.value
    assert (error.operator, error.operator_method, error.phase) == ("store", "process_batch", "run")
    assert isinstance(error.__cause__, StateTypeError)
    assert f"caused by: StateTypeError: {words}" in str(error)
    assert "in process_element" in str(error)  # the user's own line, not the snapshot


def test_values_that_fit_the_declared_type_are_kept_and_snapshotted() -> None:
    harness = OneInputHarness(store())
    cases = [("value", 10), ("value", 11), ("list", 4), ("map-key", 6), ("map-value", 8)]
    harness.process_records(
        [{"k": i, "kind": kind, "case": case} for i, (kind, case) in enumerate(cases)]
    )
    snapshot = harness.checkpoint(1)
    assert snapshot.checkpoint_id == 1 and len(harness.output_rows()) == 5


def test_a_failed_streaming_query_is_a_flintlock_error_with_the_cause_first() -> None:
    from flintlock.core.job.micro_batches import query_failure

    text = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: Traceback (most "
        "recent call last):\n  File \"job.py\", line 3, in f\nKeyError: 'id'\n"
    )
    assert query_failure(text) == (
        "KeyError: 'id': the streaming query failed ([STREAM_FAILED] Query [id = 1] "
        "terminated with exception: Traceback (most recent call last):)"
    )
    assert issubclass(JobControlError, FlintlockError)


def test_from_dataframe_refuses_what_is_no_dataframe_at_once(tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=1, checkpoint_dir=str(tmp_path))
    with pytest.raises(GraphError, match=r"from_dataframe takes a Spark DataFrame .* not Table"):
        env.from_dataframe(pa.table({"a": [1]}))  # type: ignore[arg-type]
    mixed = pd.DataFrame({"a": [1, "x"]})
    with pytest.raises(GraphError, match="this pandas DataFrame cannot become Arrow"):
        env.from_dataframe(mixed)  # type: ignore[arg-type]


def test_a_positional_collect_name_is_refused_as_it_would_name_the_job() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    words = env.from_collection([{"word": "to"}, {"word": "be"}])
    with pytest.raises(GraphError, match=r"collect\('kept'\) runs the job at once.*job's") as told:
        words.collect("kept")  # nothing runs: refused before Spark starts
    assert "collect_async('kept')" in str(told.value)
    kept = words.collect_async("kept")
    assert repr(kept) == "CollectedRows('kept', not run yet)"
    with pytest.raises(GraphError, match="collect sink 'kept' has no rows yet: run the job"):
        kept.table()
