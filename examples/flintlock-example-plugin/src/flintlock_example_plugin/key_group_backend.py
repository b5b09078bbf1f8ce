"""A third-party state backend: keyed state kept in one dict per key group.

It reuses flintlock's table-based keyed backend, so handles, TTL and the snapshot format
are flintlock's own; it only says where entries live. Registered as ``key-group-dicts``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flintlock import KeyedStateBackend, StateBackend
from flintlock.plugin_api import Chunk, TableKeyedStateBackend


class KeyGroupTable:
    """One state's entries as ``{key group: {key: stored value}}``."""

    def __init__(self, backend: KeyedStateBackend) -> None:
        self._backend = backend
        self.groups: dict[int, dict[Any, Any]] = {}

    def _group(self, key: Any) -> dict[Any, Any]:
        backend = self._backend
        group = backend.current_key_group if key == backend.current_key else backend.key_group(key)
        return self.groups.setdefault(group, {})

    def get(self, key: Any, default: Any = None) -> Any:
        return self._group(key).get(key, default)

    def __setitem__(self, key: Any, stored: Any) -> None:
        self._group(key)[key] = stored

    def pop(self, key: Any, default: Any = None) -> Any:
        return self._group(key).pop(key, default)

    def update(self, entries: dict[Any, Any]) -> None:
        for key, stored in entries.items():
            self[key] = stored


class KeyGroupKeyedStateBackend(TableKeyedStateBackend[KeyGroupTable]):
    """Keyed state of one operator in one subtask, partitioned by key group."""

    def new_table(self, name: str) -> KeyGroupTable:
        return KeyGroupTable(self)

    def table_chunks(self, name: str, table: KeyGroupTable) -> Iterator[Chunk]:
        for group, entries in sorted(table.groups.items()):
            if entries:
                yield list(entries), list(entries.values()), [group] * len(entries)

    def load(
        self, name: str, table: KeyGroupTable, entries: Iterable[tuple[int, Any, Any]]
    ) -> None:
        for group, key, stored in entries:
            table.groups.setdefault(group, {})[key] = stored


class KeyGroupStateBackend(StateBackend):
    """In memory, one dict per key group (what a rescale moves)."""

    name = "key-group-dicts"

    def create_keyed_backend(self, key_groups: range, max_parallelism: int) -> KeyedStateBackend:
        return KeyGroupKeyedStateBackend(key_groups, max_parallelism)
