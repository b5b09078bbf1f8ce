"""Mistakes the job's definition already shows are flintlock errors before Spark starts.

Each check raises as the DataStream method is called, or at the top of ``execute()``
before a Spark session is asked for (``active_or_local_session`` is replaced by a guard
that fails the test if it is reached). Also: known schemas, typed event time, multi-column
keys and key selectors in the harness, empty inputs and all-null first outputs.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from flintlock import (
    FlintlockError,
    KeyedProcessFunction,
    LifecycleError,
    MapFunction,
    ProcessFunction,
    SchemaMismatchError,
    Source,
    SourceOperator,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from flintlock.core.api.keys import KeySelector
from flintlock.core.datastream import datastream, environment
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.exchange.key_groups import key_group_of, key_group_range
from flintlock.core.exchange.murmur import key_groups_of
from flintlock.core.exchange.partitioners import BatchSplitter, hash_by
from flintlock.core.runtime.row_batches import MAX_HELD_ROWS
from flintlock.core.sources.source import CollectionSource
from flintlock.errors import CheckpointDirectoryError, EventTimeError, GraphError, NotPicklableError
from flintlock.operators.basic import FlatMapOperator, MapOperator
from flintlock.operators.process import KeyedProcessOperator, ProcessOperator
from flintlock.sinks.collect import CollectSink
from flintlock.testing import OneInputHarness, SourceHarness

SCHEMA = pa.schema([("user", pa.string()), ("day", pa.int64()), ("amount", pa.float64())])
ROWS = [{"user": "ada", "day": 1, "amount": 2.5}, {"user": "bob", "day": 2, "amount": 1.0}]


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if execute() gets as far as asking for a Spark session."""

    def spark_would_start(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("execute() reached the Spark session: the check came too late")

    monkeypatch.setattr(environment, "active_or_local_session", spark_would_start)


def env(**kwargs: Any) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment(parallelism=kwargs.pop("parallelism", 2), **kwargs)


# ---- parallelism ----


@pytest.mark.parametrize("value", [0, -1, 2.0, "2", True])
def test_a_parallelism_that_is_not_a_positive_int_is_refused(value: Any) -> None:
    with pytest.raises(GraphError, match=r"parallelism .* must be an int in 1\.\.128"):
        StreamExecutionEnvironment(parallelism=value)
    stream = env().from_collection(ROWS).map(lambda r: r)
    with pytest.raises(GraphError, match=r"'map': set_parallelism .* must be an int"):
        stream.set_parallelism(value)


def test_flintlock_parallelism_from_the_environment_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLINTLOCK_PARALLELISM", "two")
    with pytest.raises(GraphError, match="FLINTLOCK_PARALLELISM='two'"):
        StreamExecutionEnvironment()
    monkeypatch.setenv("FLINTLOCK_PARALLELISM", "0")
    with pytest.raises(GraphError, match="parallelism 0 must be"):
        StreamExecutionEnvironment()
    monkeypatch.setenv("FLINTLOCK_PARALLELISM", "3")
    assert StreamExecutionEnvironment().parallelism == 3


def test_max_parallelism_is_checked() -> None:
    with pytest.raises(GraphError, match="max_parallelism 0"):
        StreamExecutionEnvironment(parallelism=1, max_parallelism=0)
    assert StreamExecutionEnvironment(max_parallelism=4).parallelism <= 4


# ---- key_by ----


def test_key_by_a_column_not_in_the_schema_names_column_operator_and_columns() -> None:
    stream = env().from_collection(ROWS)
    with pytest.raises(GraphError) as caught:
        stream.key_by("usr")
    message = str(caught.value)
    assert "column 'usr' is not in its schema" in message
    assert "after 'source:collection'" in message
    assert "['user', 'day', 'amount']" in message


def test_key_by_after_an_operator_with_a_declared_output_schema_checks_it() -> None:
    out = pa.schema([("user", pa.string()), ("total", pa.float64())])
    mapped = env().from_collection(ROWS).map(lambda r: r, name="enrich", output_schema=out)
    assert mapped.schema == out
    with pytest.raises(GraphError, match=r"key_by\(\['user', 'day'\]\) after 'enrich'.*'day'"):
        mapped.key_by(["user", "day"])
    assert mapped.key_by(["user"]).schema == out


def test_key_by_without_a_known_schema_is_not_checked() -> None:
    mapped = env().from_collection(ROWS).map(lambda r: {"x": 1})
    assert mapped.schema is None
    assert mapped.key_by("anything").key_column == "anything"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (5, "a key is a column name, a list of column names or a key selector"),
        (None, "a key is a column name"),
        ("", "the key column name is empty"),
        ([], "the list of key columns is empty"),
        (["user", 3], "3 is not"),
        (["user", "user"], r"\['user'\] appear more than once"),
        (lambda row, other: row, "takes one argument"),
        ("amount", "key column 'amount' has type double, which cannot be hashed"),
    ],
)
def test_key_by_refuses_what_is_not_a_usable_key(key: Any, expected: str) -> None:
    stream = env().from_collection(ROWS)
    with pytest.raises(GraphError, match=expected):
        stream.key_by(key)


def test_key_by_takes_columns_lists_and_selectors() -> None:
    stream = env().from_collection(ROWS)
    assert stream.key_by("user").key_column == "user"
    assert stream.key_by(["user", "day"]).key_selector.columns == ("user", "day")
    assert stream.key_by(lambda row: row["user"][0]).key_selector.columns is None

    class ByUser(KeySelector):
        columns = ("user",)

        def get_key(self, row: dict[str, Any]) -> Any:
            return row["user"]

    with pytest.raises(GraphError, match="'user'"):
        env().from_collection([{"u": "a"}]).key_by(ByUser())


def test_a_keyed_process_function_needs_a_keyed_stream() -> None:
    stream = env().from_collection(ROWS)
    with pytest.raises(GraphError, match=r"CountPerKey is a KeyedProcessFunction.*key_by"):
        stream.process(CountPerKey(), name="count")
    assert stream.key_by("user").process(CountPerKey()).schema is None


# ---- multi-column keys and key selectors, routing and state ----


def test_composite_key_groups_agree_between_routing_and_state() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(-(2**40), 2**40, 500).tolist()
    b = [f"u{i % 37}" for i in range(500)]
    struct = pa.StructArray.from_arrays([pa.array(a), pa.array(b)], names=["0", "1"])
    expected = [key_group_of((x, y), 128) for x, y in zip(a, b, strict=True)]
    assert key_groups_of(struct, 128).tolist() == expected
    assert key_groups_of(struct.slice(100, 50), 128).tolist() == expected[100:150]
    # the combined key is not the key of either column alone
    assert expected != [key_group_of(x, 128) for x in a]

    batch = pa.record_batch({"a": a, "b": b, "v": list(range(500))})
    for key in (["a", "b"], KeyByPair(), _pair):
        selector = datastream.DataStream(env(), [])._key_selector(key)
        splitter = BatchSplitter(hash_by(selector), 0, 3, 128)
        seen = 0
        for target, part in splitter.split(batch):
            owned = key_group_range(target, 3, 128)
            pairs = zip(part.column("a").to_pylist(), part.column("b").to_pylist(), strict=True)
            assert all(key_group_of(pair, 128) in owned for pair in pairs)
            seen += part.num_rows
        assert seen == 500


def _pair(row: dict[str, Any]) -> tuple[Any, Any]:
    return (row["a"], row["b"])


class KeyByPair(KeySelector):
    """A batch key selector: the fast path, a struct array of the two columns."""

    def key_array(self, batch: pa.RecordBatch) -> pa.Array:
        return pa.StructArray.from_arrays([batch.column("a"), batch.column("b")], names=["a", "b"])


class CountPerKey(KeyedProcessFunction):
    """Counts rows per key; emits the key as ctx.get_current_key() sees it, at each row."""

    def open(self) -> None:
        self.count = self.runtime_context.get_state(
            ValueStateDescriptor("count", pa.int64(), default=0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.count.update(self.count.value() + 1)
        ctx.timer_service().register_event_time_timer(100)
        key = ctx.get_current_key()
        out.collect({"key": repr(key), "count": self.count.value()})

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect({"key": repr(ctx.get_current_key()), "count": -self.count.value()})


def _user_day(row: dict[str, Any]) -> tuple[Any, Any]:
    return (row["user"], row["day"])


@pytest.mark.parametrize("key", [["user", "day"], _user_day])
def test_multi_column_keyed_state_and_timers_survive_restore(key: Any) -> None:
    rows = [{"user": u, "day": d} for u, d in [("a", 1), ("a", 2), ("a", 1), ("b", 1)]]

    def operator() -> KeyedProcessOperator:
        if callable(key):
            return KeyedProcessOperator(CountPerKey(), key_selector=key, name="count")
        return KeyedProcessOperator(CountPerKey(), key_column=key, name="count")

    first = OneInputHarness(operator())
    first.process_records(rows)
    assert first.output_rows() == [
        {"key": "('a', 1)", "count": 1},
        {"key": "('a', 2)", "count": 1},
        {"key": "('a', 1)", "count": 2},
        {"key": "('b', 1)", "count": 1},
    ]
    snapshot = first.checkpoint(1)
    state = snapshot.operator("count")
    assert state is not None and state.timers is not None
    second = OneInputHarness(operator(), restore_from=snapshot)
    second.process_records([{"user": "a", "day": 1}])
    second.process_watermark(100)  # the timers of every key, restored with tuple keys
    out = second.output_rows()
    assert out[0] == {"key": "('a', 1)", "count": 3}
    assert sorted(out[1:], key=lambda r: r["key"]) == [
        {"key": "('a', 1)", "count": -3},
        {"key": "('a', 2)", "count": -1},
        {"key": "('b', 1)", "count": -1},
    ]


# ---- pickling, before Spark starts ----


def _job(stream_end: Any) -> None:
    stream_end.sink_to(CollectSink("out"))


def test_a_lambda_closing_over_a_lock_is_named_before_spark_starts(no_spark: None) -> None:
    lock = threading.Lock()
    e = env()
    _job(e.from_collection(ROWS).map(lambda r: (lock, r)[1], name="locked"))
    with pytest.raises(NotPicklableError) as caught:
        e.execute("pickles")
    message = str(caught.value)
    assert "operator 'locked' (MapOperator)" in message
    assert "closure variable 'lock'" in message
    assert "_thread.lock" in message
    assert isinstance(caught.value, FlintlockError)


class Enrich(MapFunction):
    def __init__(self) -> None:
        self.lookup = {"ada": 1}
        self.connection = sqlite3.connect(":memory:")  # belongs in open()

    def map(self, value: dict[str, Any]) -> dict[str, Any]:
        return value


def test_a_function_attribute_that_cannot_be_pickled_is_named(no_spark: None) -> None:
    e = env()
    _job(e.from_collection(ROWS).map(Enrich(), name="enrich"))
    with pytest.raises(NotPicklableError) as caught:
        e.execute("pickles")
    message = str(caught.value)
    assert "operator 'enrich' (MapOperator)" in message
    assert "operator.function.connection holds a sqlite3.Connection" in message
    assert "create it on the worker (in open())" in message


def test_a_sink_and_a_plugin_that_cannot_be_pickled_are_named(
    no_spark: None, tmp_path: Path
) -> None:
    with open(tmp_path / "log.txt", "w") as log:
        sink = CollectSink("out")
        sink.log = log  # type: ignore[attr-defined]
        e = env()
        e.from_collection(ROWS).sink_to(sink)
        with pytest.raises(NotPicklableError, match=r"operator 'sink:out'.*\.sink\.log holds"):
            e.execute("pickles")

    class Tracer:
        def __init__(self) -> None:
            self.lock = threading.RLock()

    e = env(plugins=[Tracer()])
    _job(e.from_collection(ROWS))
    with pytest.raises(NotPicklableError, match=r"plugin 0 \(Tracer\).*plugin\.lock holds"):
        e.execute("pickles")


# ---- checkpoint directory, before Spark starts ----


def test_a_checkpoint_directory_that_cannot_be_created_is_named(
    no_spark: None, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for path in (str(blocker / "chk"), "nofs://bucket/chk", "relative/chk"):
        e = env(checkpoint_dir=path)
        _job(e.from_collection(ROWS))
        with pytest.raises(CheckpointDirectoryError, match=f"checkpoint directory '{path}'"):
            e.execute("checkpoints")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_checkpoint_directory_is_refused(no_spark: None, tmp_path: Path) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        e = env(checkpoint_dir=str(folder))
        _job(e.from_collection(ROWS))
        with pytest.raises(CheckpointDirectoryError, match="is not writable"):
            e.execute("checkpoints")
    finally:
        folder.chmod(0o700)


def test_a_writable_checkpoint_directory_passes_and_keeps_no_probe(tmp_path: Path) -> None:
    from flintlock.core.job.checks import check_before_spark

    e = env(checkpoint_dir=str(tmp_path / "new" / "chk"))
    _job(e.from_collection(ROWS).map(lambda r: r))
    check_before_spark(e.transformations, e.checkpoint_dir, e.plugins)
    assert list((tmp_path / "new" / "chk").iterdir()) == []


# ---- event time ----


def test_a_watermark_column_of_another_type_is_refused() -> None:
    with pytest.raises(EventTimeError, match="'user' has type string"):
        env().from_collection(ROWS, watermark_strategy=WatermarkStrategy("user"))
    with pytest.raises(EventTimeError, match="'ts' is not in the schema"):
        env().from_collection(ROWS, watermark_strategy=WatermarkStrategy("ts"))
    with pytest.raises(EventTimeError, match="max_out_of_orderness"):
        WatermarkStrategy("day", max_out_of_orderness=1.5)  # type: ignore[arg-type]
    env().from_collection(ROWS, watermark_strategy=WatermarkStrategy("day"))


def test_a_dropped_event_time_column_is_named_at_process() -> None:
    stream = env().from_collection(ROWS, watermark_strategy=WatermarkStrategy("day"))
    narrowed = stream.map(lambda r: r, output_schema=pa.schema([("user", pa.string())]))
    with pytest.raises(GraphError, match="event-time column 'day'"):
        narrowed.process(Stamps())


class Stamps(ProcessFunction):
    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        out.collect({"stamp": ctx.timestamp()})


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_timestamp_columns_are_event_time_in_epoch_milliseconds(unit: str) -> None:
    moments = [dt.datetime(2026, 3, 1, 12, 0, 0, 123000), dt.datetime(1969, 12, 31, 23, 59, 59)]
    if unit == "s":
        moments[0] = moments[0].replace(microsecond=0)
    table = pa.table({"t": pa.array(moments, pa.timestamp(unit, tz="UTC"))})
    millis = [int(m.replace(tzinfo=dt.timezone.utc).timestamp() * 1000) for m in moments]
    strategy = WatermarkStrategy("t", max_out_of_orderness=dt.timedelta(seconds=2))
    assert env().from_arrow(table, watermark_strategy=strategy).schema == table.schema

    harness = SourceHarness(
        SourceOperator(CollectionSource(table, 1), strategy),
        ProcessOperator(Stamps(), timestamp_column="t", name="stamps"),
    )
    harness.run()
    assert harness.output().column("stamp").to_pylist() == millis
    assert harness.watermarks[0] == millis[0] - 2000 - 1


# ---- known schemas ----


def test_schemas_are_known_from_sources_and_kept_where_they_must_be(tmp_path: Path) -> None:
    e = env()
    stream = e.from_collection(ROWS)
    assert stream.schema == SCHEMA
    assert stream.filter(lambda r: True).schema == SCHEMA
    assert stream.filter_batch(lambda b: pc.greater(b.column("day"), 0)).schema == SCHEMA
    assert stream.key_by("user").schema == SCHEMA
    assert stream.rebalance().schema == SCHEMA and stream.broadcast().schema == SCHEMA
    assert stream.union(e.from_collection(ROWS)).schema == SCHEMA
    assert stream.union(e.from_collection([{"x": 1}])).schema is None
    assert stream.map(lambda r: r).schema is None
    assert stream.flat_map(lambda r: [r]).schema is None
    assert stream.process(Stamps()).schema is None

    class Declared(MapFunction):
        output_schema = pa.schema([("n", pa.int32())])

    assert stream.map(Declared()).schema == Declared.output_schema
    out = pa.schema([("s", pa.string())])
    assert stream.map_batch(lambda b: b, output_schema=out).schema == out
    assert stream.flat_map(lambda r: [r], output_schema=out).schema == out
    assert stream.key_by("user").process(CountPerKey(), output_schema=out).schema == out
    with pytest.raises(GraphError, match=r"output_schema must be a pyarrow\.Schema"):
        stream.map(lambda r: r, output_schema={"s": "string"})  # type: ignore[arg-type]

    table = pa.table({"k": pa.array([1, 2], pa.int32()), "v": ["a", "b"]})
    assert e.from_arrow(table).schema == table.schema
    pq.write_table(table, tmp_path / "part-0.parquet")
    assert e.from_parquet(str(tmp_path)).schema == table.schema
    with pytest.raises(GraphError, match="from_parquet: cannot read a Parquet dataset at"):
        e.from_parquet(str(tmp_path / "missing"))

    class Declares(Source):
        schema = pa.schema([("id", pa.int64())])

        def create_reader(self, subtask_index: int, parallelism: int, positions: Any) -> Any:
            raise NotImplementedError

    with pytest.raises(GraphError, match="column 'user' is not in its schema"):
        e.from_source(Declares()).key_by("user")


def test_from_collection_infers_over_every_row_and_names_a_bad_value() -> None:
    rows = [{"id": i, "note": None} for i in range(3)] + [{"id": 3, "note": "late", "x": 1.5}]
    source = CollectionSource(rows, batch_size=2)
    assert {b.schema for b in source.batches} == {source.schema}
    assert source.schema == pa.schema(
        [("id", pa.int64()), ("note", pa.string()), ("x", pa.float64())]
    )
    assert pa.Table.from_batches(source.batches).to_pylist()[3] == {
        "id": 3,
        "note": "late",
        "x": 1.5,
    }
    with pytest.raises(SchemaMismatchError) as caught:
        env().from_collection([{"v": 1}, {"v": 2}, {"v": "three"}, {"v": 4}])
    message = str(caught.value)
    assert "from_collection: column 'v' does not fit one type" in message
    assert "row 2 has str 'three'" in message and "int64" in message
    with pytest.raises(SchemaMismatchError, match=r"column 'v' does not fit its type int8.*row 1"):
        env().from_collection([{"v": 1}, {"v": 1000}], schema=pa.schema([("v", pa.int8())]))


def test_an_empty_collection_keeps_its_declared_schema() -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    stream = env().from_collection([], schema=schema)
    assert stream.schema == schema
    out_schema = pa.schema([("id", pa.int64())])
    harness = SourceHarness(
        CollectionSource([], schema=schema),
        MapOperator(lambda b: b.select(["id"]), batch=True, name="ids"),
        MapOperator(lambda r: r, output_schema=out_schema, name="rows"),
    )
    harness.run()
    assert harness.output().schema == out_schema
    assert harness.output().num_rows == 0


# ---- output schemas at run time ----


def test_map_batch_output_is_cast_to_output_schema_or_names_the_column() -> None:
    schema = pa.schema([("v", pa.int64()), ("s", pa.string())])
    harness = OneInputHarness(
        MapOperator(
            lambda b: pa.record_batch({"s": ["x"] * b.num_rows, "v": b.column("v")}),
            batch=True,
            output_schema=schema,
        )
    )
    harness.process_batch(pa.record_batch({"v": pa.array([1, 2], pa.int8())}))
    assert harness.output().schema == schema

    failing = OneInputHarness(
        MapOperator(lambda b: b, batch=True, output_schema=schema, name="shape")
    )
    with pytest.raises(LifecycleError) as caught:
        failing.process_batch(pa.record_batch({"v": [1]}))
    assert isinstance(caught.value.__cause__, SchemaMismatchError)
    assert "operator 'shape'" in str(caught.value.__cause__)
    assert "missing column(s) ['s']" in str(caught.value.__cause__)

    bad_cast = OneInputHarness(
        FlatMapOperator(lambda b: b, batch=True, output_schema=schema.remove(1), name="cast")
    )
    with pytest.raises(LifecycleError) as caught:
        bad_cast.process_batch(pa.record_batch({"v": ["one"]}))
    assert "output column 'v' of type string does not cast" in str(caught.value.__cause__)


def test_a_first_output_batch_with_an_all_null_column_does_not_lock_it() -> None:
    def maybe(row: dict[str, Any]) -> dict[str, Any]:
        return {"i": row["i"], "v": row["i"] * 10 if row["i"] >= 2 else None}

    harness = OneInputHarness(MapOperator(maybe, name="maybe"))
    harness.process_records([{"i": 0}, {"i": 1}])
    assert harness.output_rows() == []  # held: 'v' has no type yet
    harness.process_records([{"i": 2}])
    harness.process_records([{"i": 3}])
    harness.complete()
    out = harness.output()
    assert out.schema == pa.schema([("i", pa.int64()), ("v", pa.int64())])
    assert out.to_pylist() == [
        {"i": 0, "v": None},
        {"i": 1, "v": None},
        {"i": 2, "v": 20},
        {"i": 3, "v": 30},
    ]


def test_held_output_survives_a_checkpoint_and_is_emitted_at_the_end() -> None:
    def nothing(row: dict[str, Any]) -> dict[str, Any]:
        return {"i": row["i"], "v": None if row["i"] < 5 else "x"}

    first = OneInputHarness(MapOperator(nothing, name="nothing"))
    first.process_records([{"i": 1}])
    snapshot = first.checkpoint(1)  # the held row goes into operator state, not downstream
    assert first.output_rows() == []
    second = OneInputHarness(MapOperator(nothing, name="nothing"), restore_from=snapshot)
    second.process_records([{"i": 2}])
    second.complete(2)  # the input ended with 'v' still null: emitted as it is
    assert second.output().schema.field("v").type == pa.null()
    assert second.output_rows() == [{"i": 1, "v": None}, {"i": 2, "v": None}]

    third = OneInputHarness(MapOperator(nothing, name="nothing"), restore_from=snapshot)
    third.process_records([{"i": 7}])
    assert third.output().to_pylist() == [{"i": 1, "v": None}, {"i": 7, "v": "x"}]
    assert third.output().schema.field("v").type == pa.string()


def test_process_output_holding_is_bounded() -> None:
    class Nulls(ProcessFunction):
        def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            out.collect({"v": None})

    harness = OneInputHarness(ProcessOperator(Nulls(), name="nulls"))
    harness.process_batch(pa.table({"i": pa.array(np.zeros(MAX_HELD_ROWS, np.int8))}))
    assert harness.output().num_rows == MAX_HELD_ROWS  # released, the type stays null
