"""The in-memory ``hashmap`` state backend: a dict per state, snapshotted to Arrow IPC.

The default and the fastest, bounded by the Python heap (``sqlite`` is for state larger
than memory). It says only where entries live: handles, TTL and the snapshot layout come
from the shared table backend, so its checkpoints are the same Arrow files ``sqlite``
writes and each restores the other's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from flintlock import KeyedStateBackend, StateBackend, hookimpl
from flintlock.plugin_api import Chunk, RestoredEntries, TableKeyedStateBackend

CHUNK = 262144
"""Entries per snapshot batch: bounds the snapshot's extra memory, keeps batches in cache."""


class HashMapKeyedStateBackend(TableKeyedStateBackend[dict[Any, Any]]):
    """Keyed state as ``{state name: {key: value}}`` on the Python heap."""

    holds_arrow_lists = True  # a dict keeps what it is given: list state may hold Arrow

    def new_table(self, name: str) -> dict[Any, Any]:
        return {}

    def table_chunks(self, name: str, table: dict[Any, Any]) -> Iterator[Chunk]:
        keys, values = list(table), list(table.values())  # no tuple per entry
        for start in range(0, len(keys), CHUNK):
            yield keys[start : start + CHUNK], values[start : start + CHUNK], None

    def load(self, name: str, table: dict[Any, Any], entries: RestoredEntries) -> None:
        table.update(zip(entries.keys, entries.stored, strict=True))

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
