"""Value state holding nested values as Arrow rows (``core/state/arrow_values.py``): what
a batch writes reads back equal through both APIs, beside per-record and restored values,
across a snapshot on every backend, and a snapshot lets go of the batches rows came from."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from flintlock import ValueStateDescriptor
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.state.arrow_values import ArrowValue
from flintlock.plugin_api import TableKeyedStateBackend
from flintlock.plugins.hashmap_backend import HashMapKeyedStateBackend
from flintlock.plugins.sqlite_backend import SQLiteKeyedStateBackend

ROW = pa.struct([("a", pa.int64()), ("b", pa.string())])
MAX_PARALLELISM = 128


def rows(keys: list[int], tag: str) -> pa.StructArray:
    return pa.array([{"a": k, "b": f"{tag}{k}"} for k in keys], ROW)


def hashmap() -> HashMapKeyedStateBackend:
    return HashMapKeyedStateBackend(range(MAX_PARALLELISM), MAX_PARALLELISM)


def per_record(backend: TableKeyedStateBackend[Any], state: Any, key: int) -> Any:
    backend.set_current_key(key)
    return state.value()


def test_a_batch_writes_arrow_rows_that_both_apis_read_beside_python_values() -> None:
    backend = hashmap()
    state = backend.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
    state.update_values(pa.array([1, 2, 3, 2]), rows([1, 2, 3, 22], "x"))  # the last 2 wins
    backend.set_current_key(4)
    state.update({"a": 4, "b": "py4"})  # a per-record write beside them
    backend.set_current_key(3)
    state.update(None)  # cleared per record
    state.update_values(pa.array([1]), pa.array([None], ROW))  # cleared by a null row
    stored = backend._tables["rows"]
    assert type(stored[2]) is ArrowValue  # held as a row, not converted
    read = state.values(pa.array([2, 4, 1, 3, 2]))
    assert read.type == ROW
    x22, py4 = {"a": 22, "b": "x22"}, {"a": 4, "b": "py4"}
    assert read.to_pylist() == [x22, py4, None, None, x22]
    assert per_record(backend, state, 2) == {"a": 22, "b": "x22"}  # a dict, per record
    assert per_record(backend, state, 1) is None


def test_a_primitive_value_state_stays_python() -> None:
    backend = hashmap()
    state = backend.get_state(ValueStateDescriptor("n", arrow_type=pa.int64()))
    state.update_values(pa.array([1, 2]), pa.array([10, 20]))
    assert backend._tables["n"] == {1: 10, 2: 20}
    assert "n" not in backend.arrow_valued


@pytest.mark.parametrize("into", ["hashmap", "sqlite"])
def test_arrow_rows_snapshot_and_restore_on_either_backend(tmp_path: Any, into: str) -> None:
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path))
    backend = hashmap()
    state = backend.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
    state.update_values(pa.array(list(range(50))), rows(list(range(50)), "x"))
    backend.set_current_key(7)
    state.update({"a": -7, "b": "seven"})
    files = backend.snapshot(storage, f"{tmp_path}/chk-1")
    restored: TableKeyedStateBackend[Any] = (
        hashmap()
        if into == "hashmap"
        else SQLiteKeyedStateBackend(range(MAX_PARALLELISM), MAX_PARALLELISM)
    )
    restored.restore(storage, files)
    again = restored.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
    expected = [{"a": k, "b": f"x{k}"} if k != 7 else {"a": -7, "b": "seven"} for k in range(50)]
    assert again.values(pa.array(list(range(50)))).to_pylist() == expected
    assert per_record(restored, again, 7) == {"a": -7, "b": "seven"}
    assert per_record(restored, again, 8) == {"a": 8, "b": "x8"}


def test_a_restored_struct_state_declared_without_a_type_reads_dicts(tmp_path: Any) -> None:
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path))
    backend = hashmap()
    state = backend.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
    state.update_values(pa.array([1, 2]), rows([1, 2], "x"))
    restored = hashmap()
    restored.restore(storage, backend.snapshot(storage, f"{tmp_path}/chk-1"))
    untyped = restored.get_state(ValueStateDescriptor("rows"))
    assert per_record(restored, untyped, 2) == {"a": 2, "b": "x2"}
    assert untyped.values(pa.array([1, 3])).to_pylist() == [{"a": 1, "b": "x1"}, None]


def test_a_snapshot_lets_go_of_a_batch_that_one_key_still_pointed_into(tmp_path: Any) -> None:
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path))
    backend = hashmap()
    state = backend.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
    keys = np.arange(200_000)
    big = pa.array([{"a": int(k), "b": "x" * 40} for k in keys[:1000]] * 200, ROW)
    state.update_values(pa.array(keys), big)
    state.update_values(pa.array(keys[1:]), rows([0] * (len(keys) - 1), "y"))  # all but key 0
    held = pa.total_allocated_bytes()
    del big
    assert pa.total_allocated_bytes() == held  # key 0's row keeps the whole first batch
    backend.snapshot(storage, f"{tmp_path}/chk-1")
    freed = held - pa.total_allocated_bytes()
    assert freed > 8_000_000, freed  # its ~9 MB of strings went with the re-pointing
    assert per_record(backend, state, 0) == {"a": 0, "b": "x" * 40}
    assert state.values(pa.array([1])).to_pylist() == [{"a": 0, "b": "y0"}]


def test_a_row_read_per_record_is_kept_as_the_dict_it_became() -> None:
    """As before rows were held as Arrow: a per-record read gives the stored object, so
    the next read (and a change made to it in place) sees the same dict."""
    backend = hashmap()
    state = backend.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
    state.update_values(pa.array([5]), rows([5], "x"))
    first = per_record(backend, state, 5)
    first["b"] = "changed"
    assert per_record(backend, state, 5) is first
    assert state.values(pa.array([5])).to_pylist() == [{"a": 5, "b": "changed"}]


def test_snapshots_in_a_row_each_restore_what_was_held_then(tmp_path: Any) -> None:
    """Re-pointed rows (moved in place), an unchanged state written again (its column as
    it is) and rows changed since, per record and by a batch, each restore as they were."""
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path))
    backend = hashmap()
    state = backend.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
    keys = list(range(30))
    state.update_values(pa.array(keys), rows(keys, "x"))
    expected = [{"a": k, "b": f"x{k}"} for k in keys]
    snapshots = [backend.snapshot(storage, f"{tmp_path}/chk-1")]
    snapshots.append(backend.snapshot(storage, f"{tmp_path}/chk-2"))  # nothing changed
    backend.set_current_key(3)
    state.update({"a": -3, "b": "per record"})
    state.update_values(pa.array([4, 5]), rows([40, 50], "y"))
    snapshots.append(backend.snapshot(storage, f"{tmp_path}/chk-3"))
    changed = list(expected)
    changed[3:6] = [{"a": -3, "b": "per record"}, {"a": 40, "b": "y40"}, {"a": 50, "b": "y50"}]
    for files, want in zip(snapshots, [expected, expected, changed], strict=True):
        restored = hashmap()
        restored.restore(storage, files)
        again = restored.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
        assert again.values(pa.array(keys)).to_pylist() == want
    assert state.values(pa.array(keys)).to_pylist() == changed


class EntryWiseBackend(HashMapKeyedStateBackend):
    """A table backend that loads entries one (key group, key, value) triple at a time,
    as a third-party backend may; it records the triples it was given."""

    def __init__(self) -> None:
        super().__init__(range(MAX_PARALLELISM), MAX_PARALLELISM)
        self.loaded: list[tuple[int, Any]] = []

    def load(self, name: str, table: dict[Any, Any], entries: Any) -> None:
        for group, key, stored in entries:
            self.loaded.append((group, key))
            table[key] = stored


def test_rows_stored_again_by_a_snapshot_carry_their_key_groups(tmp_path: Any) -> None:
    """A snapshot stores the Python-written values again as rows of the column written;
    a backend iterating the entries it is given sees each key with its own key group."""
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path))
    backend = EntryWiseBackend()
    state = backend.get_state(ValueStateDescriptor("rows", arrow_type=ROW))
    for key in (3, 11, 250):
        backend.set_current_key(key)
        state.update({"a": key, "b": "py"})
    files = backend.snapshot(storage, f"{tmp_path}/chk-1")
    written = pa.ipc.open_file(files[0].path).read_all()
    groups_of = dict(zip(written["key"].to_pylist(), written["key_group"].to_pylist(), strict=True))
    assert sorted(backend.loaded, key=lambda entry: entry[1]) == [
        (groups_of[key], key) for key in (3, 11, 250)
    ]
    assert len(set(groups_of.values())) > 1  # the keys lie in different key groups
    assert type(backend._tables["rows"][11]) is ArrowValue
