"""Batch-level keyed list state: ``values``, ``add_values`` and ``clear_values`` give what a
plain Python dict of lists gives, on every backend, across a checkpoint and restore, and
mixed with the per-record methods; the ``hashmap`` backend keeps batch-added rows as Arrow."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from flintlock import (
    KeyedBatchProcessFunction,
    KeyedProcessFunction,
    ListStateDescriptor,
    StateTtlConfig,
)
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.state.keyed_lists import ArrowElements
from flintlock.operators.batch_process import KeyedBatchProcessOperator
from flintlock.operators.process import KeyedProcessOperator
from flintlock.plugins.hashmap_backend import HashMapStateBackend
from flintlock.testing import OneInputHarness

BACKENDS = ["hashmap", "sqlite", "key-group-dicts"]
ROW = pa.struct([("a", pa.int64()), ("b", pa.string())])
OUT = pa.schema([("k", pa.int64()), ("before", pa.list_(ROW))])


class KeepLists(KeyedBatchProcessFunction):
    """Per batch: every row's list as it was before the batch; then the keys of rows with
    a negative ``a`` are cleared and the other rows appended."""

    output_schema = OUT

    def open(self) -> None:
        self.rows = self.runtime_context.get_list_state(ListStateDescriptor("rows", arrow_type=ROW))

    def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> pa.RecordBatch:
        before = self.rows.values(keys)
        clearing = pc.less(batch.column("a"), 0)
        self.rows.clear_values(keys.filter(clearing))
        kept = batch.filter(pc.invert(clearing))
        values = pa.StructArray.from_arrays([kept.column("a"), kept.column("b")], ["a", "b"])
        self.rows.add_values(kept.column("k"), values)
        return pa.RecordBatch.from_arrays([keys, before], schema=OUT)


class ReadLists(KeyedProcessFunction):
    """Per record: the key's list, then the row appended (the per-record methods)."""

    output_schema = OUT

    def open(self) -> None:
        self.rows = self.runtime_context.get_list_state(ListStateDescriptor("rows", arrow_type=ROW))

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        out.collect({"k": value["k"], "before": self.rows.get()})
        self.rows.add({"a": value["a"], "b": value["b"]})


def batches(seed: int, count: int) -> list[pa.RecordBatch]:
    """Random batches of (k, a, b): repeated keys within a batch, some clears (a < 0)."""
    rng = random.Random(seed)
    out = []
    for number in range(count):
        size = rng.randint(0, 40)
        rows = [
            {"k": rng.randint(0, 9), "a": rng.choice([-1, *range(8)]), "b": f"{number}.{i}"}
            for i in range(size)
        ]
        schema = pa.schema([("k", pa.int64()), ("a", pa.int64()), ("b", pa.string())])
        out.append(pa.RecordBatch.from_pylist(rows, schema=schema))
    return out


def reference(feed: list[pa.RecordBatch]) -> list[tuple[int, list[dict[str, Any]]]]:
    """What KeepLists emits, in plain Python."""
    lists: dict[int, list[dict[str, Any]]] = {}
    out = []
    for batch in feed:
        rows = batch.to_pylist()
        out.extend((row["k"], list(lists.get(row["k"], []))) for row in rows)
        for row in rows:
            if row["a"] < 0:
                lists.pop(row["k"], None)
        for row in rows:
            if row["a"] >= 0:
                lists.setdefault(row["k"], []).append({"a": row["a"], "b": row["b"]})
    return out


def emitted(harness: OneInputHarness) -> list[tuple[int, list[dict[str, Any]]]]:
    return [(row["k"], row["before"]) for row in harness.output_rows()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_batch_lists_match_python_across_a_restore(backend: str, seed: int) -> None:
    feed = batches(seed, 30)
    first = OneInputHarness(
        KeyedBatchProcessOperator(KeepLists(), key_column="k"), state_backend=backend
    )
    for batch in feed[:15]:
        first.process_batch(batch)
    second = OneInputHarness(
        KeyedBatchProcessOperator(KeepLists(), key_column="k"),
        state_backend=backend,
        restore_from=first.checkpoint(1),
    )
    for batch in feed[15:]:
        second.process_batch(batch)
    assert emitted(first) + emitted(second) == reference(feed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lists_added_per_batch_are_read_per_record_after_a_restore(backend: str) -> None:
    feed = batches(3, 10)
    writer = OneInputHarness(
        KeyedBatchProcessOperator(KeepLists(), key_column="k", name="lists"), state_backend=backend
    )
    for batch in feed:
        writer.process_batch(batch)
    reader = OneInputHarness(
        KeyedProcessOperator(ReadLists(), key_column="k", name="lists"),
        state_backend=backend,
        restore_from=writer.checkpoint(1),
    )
    probe = [{"k": k, "a": 100 + k, "b": "probe"} for k in range(10)] * 2
    reader.process_records(probe)
    final = _final_lists(feed)
    expected = [(k, final.get(k, [])) for k in range(10)]
    expected += [(k, [*final.get(k, []), {"a": 100 + k, "b": "probe"}]) for k in range(10)]
    assert emitted(reader) == expected


def _final_lists(feed: list[pa.RecordBatch]) -> dict[int, list[dict[str, Any]]]:
    """Each key's list after the whole feed (the reference's state at its end)."""
    probe = pa.RecordBatch.from_pylist(
        [{"k": k, "a": 0, "b": ""} for k in range(10)],
        schema=feed[0].schema,
    )
    return dict(reference([*feed, probe])[-10:])


def keyed_list(ttl: StateTtlConfig | None = None) -> tuple[Any, Any]:
    backend = HashMapStateBackend().create_keyed_backend(range(128), 128)
    descriptor = ListStateDescriptor("rows", arrow_type=ROW, ttl_config=ttl)
    return backend, backend.get_state(descriptor)


def rows(*pairs: tuple[int, str]) -> pa.StructArray:
    return pa.array([{"a": a, "b": b} for a, b in pairs], ROW)


def test_hashmap_keeps_batch_added_rows_as_arrow_and_mixes_them_with_per_record_calls() -> None:
    backend, state = keyed_list()
    state.add_values(pa.array([1, 2, 1]), rows((1, "x"), (2, "y"), (3, "z")))
    table = backend._tables["rows"]
    assert isinstance(table[1], ArrowElements) and isinstance(table[2], ArrowElements)
    assert [len(chunk) for chunk in table[1].chunks] == [2]
    backend.set_current_key(1)
    assert state.get() == [{"a": 1, "b": "x"}, {"a": 3, "b": "z"}]
    state.add({"a": 4, "b": "w"})  # key 1 is Python now; a batch append turns it to Arrow
    state.add_values(pa.array([1, 3]), rows((5, "v"), (6, "u")))
    assert isinstance(table[1], ArrowElements)
    got = state.values(pa.array([3, 1, 4, 2]))
    assert got.to_pylist() == [
        [{"a": 6, "b": "u"}],
        [{"a": 1, "b": "x"}, {"a": 3, "b": "z"}, {"a": 4, "b": "w"}, {"a": 5, "b": "v"}],
        [],
        [{"a": 2, "b": "y"}],
    ]
    state.clear_values(pa.array([1, 1, 4]))
    assert state.values(pa.array([1, 2])).to_pylist() == [[], [{"a": 2, "b": "y"}]]


def test_batch_appends_refuse_nulls_mismatched_lengths_and_other_types() -> None:
    _, state = keyed_list()
    with pytest.raises(ValueError, match="list state 'rows' takes no None elements"):
        state.add_values(pa.array([1]), pa.array([None], ROW))
    with pytest.raises(ValueError, match="list state 'rows': 2 keys but 1 values"):
        state.add_values(pa.array([1, 2]), rows((1, "x")))
    with pytest.raises(TypeError, match="list state 'rows' holds struct"):
        state.add_values(pa.array([1]), pa.array(["text"]))


def test_with_a_ttl_batch_appends_are_python_elements_that_expire() -> None:
    now = [0]
    backend, state = keyed_list(StateTtlConfig(ttl_ms=10))
    backend.ttl_clock = lambda: now[0]
    state.add_values(pa.array([1]), rows((1, "x")))
    now[0] = 5
    state.add_values(pa.array([1]), rows((2, "y")))
    assert not isinstance(backend._tables["rows"][1], ArrowElements)
    now[0] = 12  # the first element expired
    assert state.values(pa.array([1])).to_pylist() == [[{"a": 2, "b": "y"}]]


def test_hashmap_restores_lists_as_arrow_and_snapshots_them_again(tmp_path: Path) -> None:
    """A snapshot's lists come back as slices of the column read (no Python rows), and
    mixed entries (Arrow, per-record Python, appended slices) snapshot to the same lists."""
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path))
    backend, state = keyed_list()
    state.add_values(pa.array([1, 2, 1, 3]), rows((1, "x"), (2, "y"), (3, "z"), (4, "w")))
    files = backend.snapshot(storage, str(tmp_path / "chk-1"))
    restored, again = keyed_list()
    restored.restore(storage, files)
    table = restored._tables["rows"]
    assert all(isinstance(table[key], ArrowElements) for key in (1, 2, 3))
    restored.set_current_key(2)
    again.add({"a": 5, "b": "v"})  # key 2 held as Python now
    again.add_values(pa.array([3]), rows((6, "u")))  # key 3: two slices
    expected = [
        [{"a": 1, "b": "x"}, {"a": 3, "b": "z"}],
        [{"a": 2, "b": "y"}, {"a": 5, "b": "v"}],
        [{"a": 4, "b": "w"}, {"a": 6, "b": "u"}],
    ]
    assert again.values(pa.array([1, 2, 3])).to_pylist() == expected
    third, last = keyed_list()
    third.restore(storage, restored.snapshot(storage, str(tmp_path / "chk-2")))
    assert last.values(pa.array([1, 2, 3])).to_pylist() == expected


def test_composite_and_null_keys_group_as_per_record_keys_do() -> None:
    backend, state = keyed_list()
    keys = pa.array([{"0": 1, "1": "x"}, {"0": 1, "1": "y"}, {"0": 1, "1": "x"}])
    state.add_values(keys, rows((1, "a"), (2, "b"), (3, "c")))
    backend.set_current_key((1, "x"))
    assert state.get() == [{"a": 1, "b": "a"}, {"a": 3, "b": "c"}]
    nulls = pa.array([None, 5, None], pa.int64())
    state.add_values(nulls, rows((4, "d"), (5, "e"), (6, "f")))
    assert backend._tables["rows"][None].to_pylist() == [{"a": 4, "b": "d"}, {"a": 6, "b": "f"}]


def test_keys_may_be_a_python_list_as_for_value_state() -> None:
    _, state = keyed_list()
    state.add_values([(1, "x"), (2, "y"), (1, "x")], rows((1, "a"), (2, "b"), (3, "c")))
    assert state.values([(1, "x"), (3, "z")]).to_pylist() == [
        [{"a": 1, "b": "a"}, {"a": 3, "b": "c"}],
        [],
    ]
    state.clear_values([(1, "x")])
    assert state.values([(1, "x"), (2, "y")]).to_pylist() == [[], [{"a": 2, "b": "b"}]]


def test_an_untyped_list_state_reads_no_keys_as_an_empty_list_array() -> None:
    backend = HashMapStateBackend().create_keyed_backend(range(128), 128)
    state = backend.get_state(ListStateDescriptor("rows"))
    assert state.values(pa.array([], pa.int64())).to_pylist() == []
    state.add_values(pa.array([7, 7]), pa.array(["a", "b"]))  # untyped: Python elements
    assert not isinstance(backend._tables["rows"][7], ArrowElements)
    assert state.values(pa.array([7, 8])).to_pylist() == [["a", "b"], []]
