"""The in-memory ``hashmap`` state backend: dicts per state, snapshotted to Arrow IPC."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from flintlock.core.checkpoint_storage import CheckpointStorage, safe_name
from flintlock.core.plugin_manager import hookimpl
from flintlock.core.snapshots import StateFile
from flintlock.core.state.arrow_codec import keys_from_arrow, keys_to_arrow, to_arrow
from flintlock.core.state.backend import KeyedStateBackend, StateBackend
from flintlock.core.state.descriptors import StateDescriptor, ValueStateDescriptor
from flintlock.core.state.handles import ListState, ValueState


class _ValueState(ValueState):
    __slots__ = ("_backend", "_default", "_table")

    def __init__(self, backend: KeyedStateBackend, table: dict[Any, Any], default: Any) -> None:
        self._backend, self._table, self._default = backend, table, default

    def value(self) -> Any:
        return self._table.get(self._backend.current_key, self._default)

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._table[self._backend.current_key] = value

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)


class _ListState(ListState):
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: KeyedStateBackend, table: dict[Any, list[Any]]) -> None:
        self._backend, self._table = backend, table

    def get(self) -> list[Any]:
        return list(self._table.get(self._backend.current_key, ()))

    def add(self, value: Any) -> None:
        self._table.setdefault(self._backend.current_key, []).append(value)

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if values:
            self._table[self._backend.current_key] = values
        else:
            self.clear()

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)


class HashMapKeyedStateBackend(KeyedStateBackend):
    """Keyed state as ``{state name: {key: value}}``, written one Arrow file per state."""

    def __init__(self, key_groups: range, max_parallelism: int) -> None:
        super().__init__(key_groups, max_parallelism)
        self._tables: dict[str, dict[Any, Any]] = {}
        self._descriptors: dict[str, StateDescriptor] = {}
        self._handles: dict[str, Any] = {}
        self._restored_kinds: dict[str, str] = {}

    def get_state(self, descriptor: StateDescriptor) -> Any:
        known = self._descriptors.get(descriptor.name)
        if known is not None and known.kind != descriptor.kind:
            raise ValueError(
                f"state '{descriptor.name}' is a {known.kind} state, asked for as {descriptor.kind}"
            )
        handle = self._handles.get(descriptor.name)
        if handle is None:
            table = self._tables.setdefault(descriptor.name, {})
            if isinstance(descriptor, ValueStateDescriptor):
                handle = _ValueState(self, table, descriptor.default)
            else:
                handle = _ListState(self, table)
            self._handles[descriptor.name] = handle
            self._descriptors[descriptor.name] = descriptor
        return handle

    def snapshot(self, storage: CheckpointStorage, directory: str) -> list[StateFile]:
        files = []
        for name, table in self._tables.items():
            if not table:
                continue
            descriptor = self._descriptors.get(name)
            kind = descriptor.kind if descriptor else self._restored_kinds.get(name, "value")
            arrow_type = descriptor.arrow_type if descriptor else None
            if kind == "list" and arrow_type is not None:
                arrow_type = pa.list_(arrow_type)
            keys = list(table)
            columns = {
                "key_group": pa.array([self.key_group(k) for k in keys], pa.int32()),
                "key": keys_to_arrow(keys, f"keys of state '{name}'"),
                "value": to_arrow(list(table.values()), arrow_type, f"state '{name}'"),
            }
            path = f"{directory}/keyed-{safe_name(name)}.arrow"
            storage.write_table(path, pa.table(columns))
            files.append(StateFile(name, kind, path))
        return files

    def restore(self, storage: CheckpointStorage, files: list[StateFile]) -> None:
        owned = self.key_groups
        for file in files:
            data = storage.read_table(file.path)
            table = self._tables.setdefault(file.name, {})
            self._restored_kinds[file.name] = file.kind
            for key_group, key, value in zip(
                data.column("key_group").to_pylist(),
                keys_from_arrow(data.column("key")),
                data.column("value").to_pylist(),
                strict=True,
            ):
                if key_group in owned:
                    table[key] = value
                    self._key_group_cache[key] = key_group

    def dispose(self) -> None:
        self._tables.clear()
        self._handles.clear()


class HashMapStateBackend(StateBackend):
    """State on the Python heap; fast, bounded by memory."""

    name = "hashmap"

    def create_keyed_backend(self, key_groups: range, max_parallelism: int) -> KeyedStateBackend:
        return HashMapKeyedStateBackend(key_groups, max_parallelism)


@hookimpl
def flintlock_register_state_backends(register: Callable[[str, Any], None]) -> None:
    register("hashmap", HashMapStateBackend)
