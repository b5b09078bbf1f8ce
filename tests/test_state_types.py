"""Every keyed state type and TTL, in the harness, on every state backend: the built-in
``hashmap`` and ``sqlite`` and the example plugin's ``key-group-dicts`` (a third-party
backend found through its entry point)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pyarrow as pa
import pytest
from state_functions import AllStates, Average, add, all_states_reference, records

from flintlock import (
    AggregatingStateDescriptor,
    KeyedProcessFunction,
    LifecycleError,
    ListStateDescriptor,
    ManualClock,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    UpdateType,
    ValueStateDescriptor,
)
from flintlock.core.exchange.key_groups import key_group_of
from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import build_registry
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import OneInputHarness

BACKENDS = ["hashmap", "sqlite", "key-group-dicts"]


def all_states(name: str = "states") -> KeyedProcessOperator:
    return KeyedProcessOperator(AllStates(), key_column="k", name=name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_state_type_equals_a_plain_python_reference_across_a_restore(backend: str) -> None:
    data = records(300)
    first = OneInputHarness(all_states(), state_backend=backend)
    first.process_records(data[:100])
    first.process_records(data[100:150])
    snapshot = first.checkpoint(1)
    second = OneInputHarness(all_states(), state_backend=backend, restore_from=snapshot)
    second.process_records(data[150:])
    second.complete(2)
    assert first.output_rows() + second.output_rows() == all_states_reference(data)


@pytest.mark.parametrize(("writer", "reader"), [("hashmap", "sqlite"), ("sqlite", "hashmap")])
def test_a_snapshot_of_one_backend_restores_on_the_other(writer: str, reader: str) -> None:
    data = records(120)
    first = OneInputHarness(all_states(), state_backend=writer)
    first.process_records(data[:60])
    second = OneInputHarness(all_states(), state_backend=reader, restore_from=first.checkpoint(1))
    second.process_records(data[60:])
    second.complete(2)
    assert first.output_rows() + second.output_rows() == all_states_reference(data)


@pytest.mark.parametrize("backend", BACKENDS)
def test_restore_at_parallelism_two_splits_every_state_by_key_group(backend: str) -> None:
    data = records(200, keys=40)
    whole = OneInputHarness(all_states(), state_backend=backend)
    whole.process_records(data[:100])
    snapshot = whole.checkpoint(1)
    outputs = []
    for subtask in range(2):
        half = OneInputHarness(
            all_states(),
            state_backend=backend,
            restore_from=snapshot,
            parallelism=2,
            subtask_index=subtask,
        )
        owned = [
            r for r in data[100:] if key_group_of(r["k"]) in range(subtask * 64, subtask * 64 + 64)
        ]
        half.process_records(owned)
        half.complete(2)
        outputs += half.output_rows()
    expected = all_states_reference(data)[100:]
    assert sorted(outputs, key=repr) == sorted(expected, key=repr)


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_files_are_arrow_with_key_group_key_and_value_columns(backend: str) -> None:
    harness = OneInputHarness(all_states(), state_backend=backend)
    harness.process_records(
        [
            {"k": "a", "v": 1, "tag": "x"},
            {"k": "a", "v": 2, "tag": "y"},
            {"k": "b", "v": 5, "tag": "x"},
        ]
    )
    snapshot = harness.checkpoint(1)
    files = {f.name: f for f in snapshot.operator("states").keyed}  # type: ignore[union-attr]
    assert {name: f.kind for name, f in files.items()} == {
        "count": "value",
        "history": "list",
        "tags": "map",
        "total": "reducing",
        "mean": "aggregating",
    }

    def read(name: str) -> list[dict[str, Any]]:
        table = pa.ipc.open_file(files[name].path).read_all()
        return sorted(table.to_pylist(), key=lambda r: (r["key"], r.get("map_key") or ""))

    ga, gb = key_group_of("a"), key_group_of("b")
    assert read("count") == [
        {"key_group": ga, "key": "a", "value": 2},
        {"key_group": gb, "key": "b", "value": 1},
    ]
    assert read("history") == [
        {"key_group": ga, "key": "a", "value": [1, 2]},
        {"key_group": gb, "key": "b", "value": [5]},
    ]
    assert read("tags") == [  # flat: one row per map entry
        {"key_group": ga, "key": "a", "map_key": "x", "value": 1},
        {"key_group": ga, "key": "a", "map_key": "y", "value": 1},
        {"key_group": gb, "key": "b", "map_key": "x", "value": 1},
    ]
    assert read("total") == [
        {"key_group": ga, "key": "a", "value": 3},
        {"key_group": gb, "key": "b", "value": 5},
    ]
    assert read("mean") == [  # the accumulator, [sum, count]
        {"key_group": ga, "key": "a", "value": [3, 2]},
        {"key_group": gb, "key": "b", "value": [5, 1]},
    ]
    schema = pa.ipc.open_file(files["tags"].path).schema
    assert schema.field("map_key").type == pa.string() and schema.field("value").type == pa.int64()


# ---- TTL: driven through the harness's keyed backend, with a manual clock ----


def opened(
    backend: str, clock: ManualClock, name: str = "ttl", **kwargs: Any
) -> tuple[OneInputHarness, Any]:
    """A started harness whose keyed backend the test drives directly."""

    class Idle(KeyedProcessFunction):
        def process_element(self, value, ctx, out):  # type: ignore[no-untyped-def]
            pass

    operator = KeyedProcessOperator(Idle(), key_column="k", name=name)
    harness = OneInputHarness(operator, state_backend=backend, ttl_clock=clock, **kwargs)
    harness.open()
    return harness, operator.context.keyed_backend


def ttl(ms: int, on_read: bool = False) -> StateTtlConfig:
    update = UpdateType.OnReadAndWrite if on_read else UpdateType.OnCreateAndWrite
    return StateTtlConfig(ms, update_type=update)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ttl_value_state_expires_at_last_write_plus_ttl(backend: str) -> None:
    clock = ManualClock(1000)
    _, keyed = opened(backend, clock)
    state = keyed.get_state(ValueStateDescriptor("v", pa.int64(), default=-1, ttl_config=ttl(10)))
    keyed.set_current_key("a")
    state.update(7)
    clock.advance(9)
    assert state.value() == 7  # a read does not refresh under OnCreateAndWrite
    clock.advance(1)
    assert state.value() == -1  # 1000 + 10 <= 1010: expired, the default again
    state.update(8)
    clock.advance(9)
    assert state.value() == 8


@pytest.mark.parametrize("backend", BACKENDS)
def test_ttl_on_read_and_write_refreshes_on_every_read(backend: str) -> None:
    clock = ManualClock()
    _, keyed = opened(backend, clock)
    state = keyed.get_state(ValueStateDescriptor("v", ttl_config=ttl(10, on_read=True)))
    keyed.set_current_key("a")
    state.update("x")
    for _ in range(5):
        clock.advance(9)
        assert state.value() == "x"  # each read prolongs its life by 10
    clock.advance(10)
    assert state.value() is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_ttl_list_elements_and_map_entries_expire_one_by_one(backend: str) -> None:
    clock = ManualClock()
    _, keyed = opened(backend, clock)
    items = keyed.get_state(ListStateDescriptor("l", pa.int64(), ttl_config=ttl(10)))
    entries = keyed.get_state(MapStateDescriptor("m", pa.string(), pa.int64(), ttl_config=ttl(10)))
    keyed.set_current_key("a")
    items.add(1)
    entries.put("x", 1)
    clock.advance(5)
    items.add(2)
    entries.put("y", 2)
    assert items.get() == [1, 2] and dict(entries.items()) == {"x": 1, "y": 2}
    clock.advance(5)  # t=10: the first element and entry expired
    assert items.get() == [2]
    assert dict(entries.items()) == {"y": 2} and entries.get("x") is None
    assert not entries.contains("x") and entries.contains("y")
    clock.advance(5)
    assert items.get() == [] and entries.is_empty()


@pytest.mark.parametrize("ttl_ms", [None, 10])
@pytest.mark.parametrize("backend", BACKENDS)
def test_map_state_pop_returns_an_entry_and_removes_it(backend: str, ttl_ms: int | None) -> None:
    clock = ManualClock()
    _, keyed = opened(backend, clock)
    config = ttl(ttl_ms) if ttl_ms is not None else None
    entries = keyed.get_state(MapStateDescriptor("m", pa.int64(), pa.int64(), ttl_config=config))
    keyed.set_current_key("a")
    entries.put(1, 10)
    entries.put(2, 20)
    keyed.set_current_key("b")
    entries.put(1, 11)
    assert entries.pop(1) == 11 and entries.pop(1) is None and entries.is_empty()
    keyed.set_current_key("a")
    assert entries.pop(2) == 20 and dict(entries.items()) == {1: 10}
    if ttl_ms is not None:
        clock.advance(ttl_ms)
        assert entries.pop(1) is None  # expired: as absent


@pytest.mark.parametrize("backend", BACKENDS)
def test_ttl_reducing_and_aggregating_state_start_over_once_expired(backend: str) -> None:
    clock = ManualClock()
    _, keyed = opened(backend, clock)
    total = keyed.get_state(ReducingStateDescriptor("r", add, pa.int64(), ttl_config=ttl(10)))
    mean = keyed.get_state(AggregatingStateDescriptor("a", Average(), ttl_config=ttl(10)))
    keyed.set_current_key(3)
    for v in (1, 2, 3):
        total.add(v)
        mean.add(v)
        clock.advance(4)  # each add rewrites: the value lives on
    assert (total.get(), mean.get()) == (6, 2.0)
    clock.advance(6)  # 10 ms after the last add
    assert (total.get(), mean.get()) == (None, None)
    total.add(5)
    mean.add(5)
    assert (total.get(), mean.get()) == (5, 5.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_expired_entries_are_not_snapshotted(backend: str) -> None:
    clock = ManualClock(100)
    harness, keyed = opened(backend, clock)
    value = keyed.get_state(ValueStateDescriptor("v", pa.int64(), ttl_config=ttl(10)))
    items = keyed.get_state(ListStateDescriptor("l", pa.int64(), ttl_config=ttl(10)))
    for key, at in (("old", 0), ("new", 5)):
        keyed.set_current_key(key)
        value.update(at)
        items.add(at)
        clock.advance(5)
    keyed.set_current_key("new")
    items.add(99)  # at 110
    clock.now = 112  # "old" (written at 100) expired at 110; "new" lives until 115
    snapshot = harness.checkpoint(1)
    files = {f.name: f.path for f in snapshot.operator("ttl").keyed}  # type: ignore[union-attr]
    assert pa.ipc.open_file(files["v"]).read_all().to_pylist() == [
        {"key_group": key_group_of("new"), "key": "new", "value": 5, "ttl_timestamp": 105}
    ]
    assert pa.ipc.open_file(files["l"]).read_all().to_pylist() == [
        {
            "key_group": key_group_of("new"),
            "key": "new",
            "value": [5, 99],
            "ttl_timestamp": [105, 110],
        }
    ]
    # the timestamps survive a restore: "new"'s value expires at 115, its 99 at 120
    clock.now = 114
    _, restored = opened(backend, clock, restore_from=snapshot)
    value = restored.get_state(ValueStateDescriptor("v", pa.int64(), ttl_config=ttl(10)))
    items = restored.get_state(ListStateDescriptor("l", pa.int64(), ttl_config=ttl(10)))
    restored.set_current_key("new")
    assert (value.value(), items.get()) == (5, [5, 99])
    clock.now = 115
    assert (value.value(), items.get()) == (None, [99])


@pytest.mark.parametrize("backend", BACKENDS)
def test_turning_ttl_on_for_restored_state_is_refused_naming_it(backend: str) -> None:
    # states snapshotted without TTL, declared with one (or as another kind) after a restore
    first = OneInputHarness(all_states(), state_backend=backend)
    first.process_records(records(5))
    _, restored = opened(backend, ManualClock(), "states", restore_from=first.checkpoint(1))
    with pytest.raises(ValueError, match="state 'count' was snapshotted without a TTL"):
        restored.get_state(ValueStateDescriptor("count", ttl_config=ttl(10)))
    with pytest.raises(ValueError, match="state 'tags' was restored as a map state"):
        restored.get_state(ValueStateDescriptor("tags"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_state_refuses_none_elements_naming_the_state(backend: str) -> None:
    _, keyed = opened(backend, ManualClock())
    items = keyed.get_state(ListStateDescriptor("items", pa.int64()))
    keyed.set_current_key("a")
    items.add_all([1, 2])
    for bad in (lambda: items.add(None), lambda: items.update([3, None])):
        with pytest.raises(ValueError, match="list state 'items' takes no None elements"):
            bad()
    assert items.get() == [1, 2]


def test_state_descriptors_check_what_they_are_given() -> None:
    with pytest.raises(ValueError, match="ttl_ms must be an int > 0"):
        StateTtlConfig(0)
    with pytest.raises(ValueError, match="reduce_function must be callable"):
        ReducingStateDescriptor("r", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be an AggregateFunction"):
        AggregatingStateDescriptor("a", add)  # type: ignore[arg-type]
    descriptor = ValueStateDescriptor("v", pa.int64()).enable_time_to_live(StateTtlConfig(5))
    assert descriptor.ttl_config == StateTtlConfig(5) and descriptor.kind == "value"


def test_an_unknown_state_backend_is_named_with_the_known_ones() -> None:
    with pytest.raises(LifecycleError) as caught:
        OneInputHarness(all_states(), state_backend="rocks").process_records(records(1))
    assert "no state backend named 'rocks'" in str(caught.value.__cause__)
    assert "hashmap, key-group-dicts, sqlite" in str(caught.value.__cause__)


def test_every_backend_is_registered_by_entry_point() -> None:
    registry = build_registry(build_plugin_manager())
    offered = {entry.name: entry.plugin_name for entry in registry.describe("state backend")}
    assert offered == {
        "hashmap": "hashmap-backend",
        "sqlite": "sqlite-backend",
        "key-group-dicts": "example",
    }


def test_sqlite_keeps_state_off_the_python_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """20 MB of state on the sqlite backend: the Python heap grows by far less."""
    from flintlock.plugins.sqlite_backend import SQLiteStateBackend

    monkeypatch.setattr(SQLiteStateBackend, "cache_entries", 1000)  # ~1 MB of values
    clock = ManualClock()
    _, keyed = opened("sqlite", clock)
    state = keyed.get_state(ValueStateDescriptor("blob", pa.binary()))
    payload = b"x" * 1000
    tracemalloc.start()
    try:
        for i in range(20_000):
            keyed.set_current_key(i)
            state.update(payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak
    keyed.set_current_key(19_999)
    assert state.value() == payload


class CountPerKey(KeyedProcessFunction):
    """Counts records per key in ValueState and lists the days of each key in MapState."""

    def open(self) -> None:
        ctx = self.runtime_context
        self.n = ctx.get_state(ValueStateDescriptor("n", pa.int64(), default=0))
        self.seen = ctx.get_map_state(MapStateDescriptor("seen", pa.int64(), pa.bool_()))

    def process_element(self, value, ctx, out):  # type: ignore[no-untyped-def]
        self.n.update(self.n.value() + 1)
        self.seen.put(value["day"], True)
        out.collect({"key": repr(ctx.get_current_key()), "n": self.n.value()})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", [["user", "day"], "flag"])
def test_tuple_and_bool_keys_keep_their_state_across_a_restore(backend: str, key: Any) -> None:
    rows = [
        {"user": u, "day": d, "flag": f}
        for u, d, f in [("ada", 1, True), ("bob", 1, False), ("ada", 1, True), ("ada", 2, True)]
    ]

    def operator() -> KeyedProcessOperator:
        return KeyedProcessOperator(CountPerKey(), key_column=key, name="count")

    first = OneInputHarness(operator(), state_backend=backend)
    first.process_records(rows[:3])
    snapshot = first.checkpoint(1)
    files = {f.name: f.path for f in snapshot.operator("count").keyed}  # type: ignore[union-attr]
    written = pa.ipc.open_file(files["n"]).read_all()
    if isinstance(key, list):  # a tuple key is a struct of its parts
        assert written.schema.field("key").type == pa.struct(
            [("0", pa.string()), ("1", pa.int64())]
        )
    else:
        assert written.schema.field("key").type == pa.bool_()
    second = OneInputHarness(operator(), state_backend=backend, restore_from=snapshot)
    second.process_records(rows[3:] + rows[:1])
    second.complete(2)
    got = [r["n"] for r in first.output_rows() + second.output_rows()]
    if isinstance(key, list):
        assert got == [1, 1, 2, 1, 3]  # (ada, 1) thrice, (bob, 1) once, (ada, 2) once
    else:
        assert got == [1, 1, 2, 3, 4]  # True four times, False once


def test_sqlite_write_back_cache_stays_consistent_when_it_overflows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cache of 2 keys: every state type, a restore, per-record and batch access mixed."""
    from flintlock.plugins.sqlite_backend import SQLiteStateBackend

    monkeypatch.setattr(SQLiteStateBackend, "cache_entries", 2)
    data = records(200)
    first = OneInputHarness(all_states(), state_backend="sqlite")
    first.process_records(data[:90])
    second = OneInputHarness(all_states(), state_backend="sqlite", restore_from=first.checkpoint(1))
    second.process_records(data[90:])
    second.complete(2)
    assert first.output_rows() + second.output_rows() == all_states_reference(data)

    _, keyed = opened("sqlite", ManualClock())
    state = keyed.get_state(ValueStateDescriptor("v", pa.int64(), default=-1))
    for key in range(10):
        keyed.set_current_key(key)
        state.update(key * 10)
    keyed.set_current_key(3)
    state.clear()  # a delete waiting in the cache
    keys = pa.array(range(10), pa.int64())
    assert state.values(keys).to_pylist() == [0, 10, 20, -1, 40, 50, 60, 70, 80, 90]
    state.update_values(pa.array([0, 9, 3]), pa.array([1, None, 33]))
    got = []
    for key in range(10):
        keyed.set_current_key(key)
        got.append(state.value())
    assert got == [1, 10, 20, 33, 40, 50, 60, 70, 80, -1]


def test_a_default_given_as_third_positional_argument_is_refused() -> None:
    """The third field of a descriptor is its kind: ``ValueStateDescriptor("t", type, 0)``
    made a value state of kind 0 whose default was None, silently."""
    with pytest.raises(ValueError, match="takes its other arguments by name"):
        ValueStateDescriptor("total", pa.int64(), 0)  # type: ignore[arg-type]
