"""The on-disk ``sqlite`` state backend: state larger than memory, in an SQLite file.

Each keyed operator of each subtask gets its own SQLite database in a scratch folder
(``FLINTLOCK_SQLITE_DIR``, else the system's temporary folder), one table per state:
``(k PRIMARY KEY, kg, v)``. Only SQLite's page cache (``SQLiteStateBackend.cache_mb``),
a write-back cache of the latest values of up to ``cache_entries`` keys per state, and
a bounded key-group cache stay in memory. The database is scratch space: it is not
durable (no journal, no fsync) and is deleted when the operator closes; checkpoints are
the same Arrow IPC files the ``hashmap`` backend writes, so either backend restores the
other's snapshots.

Keys are stored as SQLite values (int, text, blob; a bool or a tuple key as tagged
text); stored values as ``marshal`` bytes — Python's own format for plain data (numbers,
strings, bytes, lists, tuples, dicts), which runs no code when read and never leaves the
subtask's scratch file.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from flintlock import KeyedStateBackend, StateBackend, hookimpl
from flintlock.plugin_api import Chunk, RestoredEntries, TableKeyedStateBackend

CHUNK = 65536
"""Entries per snapshot batch and per restore insert."""

_IN_BATCH = 500
"""Keys per ``IN (...)`` lookup (under SQLite's default limit of 999 parameters)."""

_TUPLE, _BOOL = "\x00T", "\x00B"


def encode_key(key: Any) -> Any:
    """A key as an SQLite value: ints, strings and bytes as they are; bools and tuples as
    tagged text (a string key never starts with NUL in practice; see the module doc)."""
    if isinstance(key, bool):
        return _BOOL + ("1" if key else "0")
    if isinstance(key, tuple):
        return _TUPLE + json.dumps([encode_key(part) for part in key])
    if isinstance(key, bytes | bytearray):
        return bytes(key)
    return key


def decode_key(value: Any) -> Any:
    """Inverse of ``encode_key``."""
    if isinstance(value, str) and value.startswith("\x00"):
        if value.startswith(_BOOL):
            return value == _BOOL + "1"
        if value.startswith(_TUPLE):
            return tuple(decode_key(part) for part in json.loads(value[len(_TUPLE) :]))
    return value


class SQLiteTable:
    """One state's entries in an SQLite table, with the few dict methods handles use.

    A bounded write-back cache of the latest stored values (``cache_entries`` keys, None
    for a deleted key) sits in front of SQLite, so that per-record access to recently
    used keys stays in Python; it is written out when full (then emptied), before a scan
    (snapshot) and before a count. Entries in the cache are always newer than SQLite's.
    """

    def __init__(
        self, backend: SQLiteKeyedStateBackend, connection: sqlite3.Connection, number: int
    ) -> None:
        self._backend = backend
        self._connection = connection
        self._cache: dict[Any, Any] = {}
        self._dirty: set[Any] = set()
        self._limit = max(1, backend.cache_entries)
        table = f"s{number}"
        connection.execute(
            f"CREATE TABLE {table} (k PRIMARY KEY, kg INTEGER NOT NULL, v BLOB NOT NULL) "
            f"WITHOUT ROWID"
        )
        self._select = f"SELECT v FROM {table} WHERE k = ?"
        self._upsert = f"INSERT OR REPLACE INTO {table} (k, kg, v) VALUES (?, ?, ?)"
        self._delete = f"DELETE FROM {table} WHERE k = ?"
        self._select_in = f"SELECT k, v FROM {table} WHERE k IN "
        self._scan = f"SELECT kg, k, v FROM {table}"
        self._count = f"SELECT count(*) FROM {table}"

    def get(self, key: Any, default: Any = None) -> Any:
        cache = self._cache
        if key in cache:
            stored = cache[key]
        else:
            row = self._connection.execute(self._select, (encode_key(key),)).fetchone()
            stored = None if row is None else marshal.loads(row[0])
            self._remember(key, stored)
        return default if stored is None else stored

    def __setitem__(self, key: Any, stored: Any) -> None:
        self._remember(key, stored)
        self._dirty.add(key)

    def pop(self, key: Any, default: Any = None) -> Any:
        """Remove ``key``; returns ``default`` (the handles never read the old value)."""
        self._remember(key, None)
        self._dirty.add(key)
        return default

    def _remember(self, key: Any, stored: Any) -> None:
        cache = self._cache
        if len(cache) >= self._limit and key not in cache:
            self.flush()
            cache.clear()
        cache[key] = stored

    def flush(self) -> None:
        """Write the cache's changes to SQLite."""
        if not self._dirty:
            return
        cache, group, dumps = self._cache, self._backend.key_group, marshal.dumps
        upserts, deletes = [], []
        for key in self._dirty:
            stored = cache[key]
            if stored is None:
                deletes.append((encode_key(key),))
            else:
                upserts.append((encode_key(key), group(key), dumps(stored)))
        self._connection.executemany(self._upsert, upserts)
        self._connection.executemany(self._delete, deletes)
        self._dirty.clear()

    def get_many(self, keys: list[Any]) -> list[Any]:
        cache = self._cache
        encoded = {key: encode_key(key) for key in keys if key not in cache}
        found: dict[Any, Any] = {}
        unique = list(dict.fromkeys(encoded.values()))
        for start in range(0, len(unique), _IN_BATCH):
            part = unique[start : start + _IN_BATCH]
            sql = self._select_in + "(" + ",".join("?" * len(part)) + ")"
            found.update(self._connection.execute(sql, part).fetchall())
        loads = marshal.loads
        out = []
        for key in keys:
            if key in cache:
                out.append(cache[key])
            else:
                value = found.get(encoded[key])
                out.append(None if value is None else loads(value))
        return out

    def _forget(self, keys: Any) -> None:
        cache, dirty = self._cache, self._dirty
        for key in keys:
            cache.pop(key, None)
            dirty.discard(key)

    def set_many(self, entries: dict[Any, Any]) -> None:
        self._forget(entries)
        group = self._backend.key_group
        dumps = marshal.dumps
        rows = [(encode_key(k), group(k), dumps(v)) for k, v in entries.items()]
        self._connection.executemany(self._upsert, rows)

    def delete_many(self, keys: list[Any]) -> None:
        self._forget(keys)
        self._connection.executemany(self._delete, [(encode_key(k),) for k in keys])

    def insert_rows(self, rows: list[tuple[int, Any, Any]]) -> None:
        """Add restored (key group, key, stored value) rows."""
        if self._cache:
            self._forget(k for _, k, _ in rows)
        dumps = marshal.dumps
        self._connection.executemany(
            self._upsert,
            [(k if type(k) is int else encode_key(k), g, dumps(v)) for g, k, v in rows],
        )

    def chunks(self, size: int) -> Iterator[Chunk]:
        self.flush()
        cursor = self._connection.execute(self._scan)
        loads = marshal.loads
        while rows := cursor.fetchmany(size):
            yield (
                [k if type(k) is int else decode_key(k) for _, k, _ in rows],
                [loads(v) for _, _, v in rows],
                [g for g, _, _ in rows],
            )

    def __len__(self) -> int:
        self.flush()
        return int(self._connection.execute(self._count).fetchone()[0])


class SQLiteKeyedStateBackend(TableKeyedStateBackend[SQLiteTable]):
    """Keyed state of one operator in one subtask, in its own SQLite file."""

    memory_map_restore = False  # restore reads one batch at a time: memory stays bounded

    def __init__(
        self,
        key_groups: range,
        max_parallelism: int,
        cache_mb: int = 16,
        cache_entries: int = 16384,
    ) -> None:
        super().__init__(key_groups, max_parallelism)
        self.cache_entries = cache_entries
        parent = os.environ.get("FLINTLOCK_SQLITE_DIR") or None
        if parent is not None:
            os.makedirs(parent, exist_ok=True)
        self.directory = tempfile.mkdtemp(prefix="flintlock-sqlite-", dir=parent)
        self.path = os.path.join(self.directory, "state.db")
        self.connection = sqlite3.connect(self.path, isolation_level=None)
        for pragma in (
            "journal_mode = OFF",  # scratch space: checkpoints are the durable copy
            "synchronous = OFF",
            "locking_mode = EXCLUSIVE",
            "temp_store = FILE",
            f"cache_size = -{cache_mb * 1024}",  # KiB: the page cache is the memory bound
        ):
            self.connection.execute(f"PRAGMA {pragma}")
        self.connection.execute("BEGIN")  # one long transaction: no commit per write

    def new_table(self, name: str) -> SQLiteTable:
        return SQLiteTable(self, self.connection, len(self._tables))

    def table_chunks(self, name: str, table: SQLiteTable) -> Iterator[Chunk]:
        return table.chunks(CHUNK)

    def load(self, name: str, table: SQLiteTable, entries: RestoredEntries) -> None:
        rows = iter(entries)
        while chunk := list(islice(rows, CHUNK)):
            table.insert_rows(chunk)

    def dispose(self) -> None:
        self._tables.clear()
        self._handles.clear()
        try:
            self.connection.close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


class SQLiteStateBackend(StateBackend):
    """State in an SQLite file per operator and subtask: larger than memory, slower."""

    name = "sqlite"
    cache_mb = 16
    """SQLite's page cache per keyed operator and subtask, in MiB."""
    cache_entries = 16384
    """Keys whose latest value each state keeps in Python (the write-back cache)."""

    def create_keyed_backend(self, key_groups: range, max_parallelism: int) -> KeyedStateBackend:
        return SQLiteKeyedStateBackend(
            key_groups, max_parallelism, self.cache_mb, self.cache_entries
        )


@hookimpl
def flintlock_register_state_backends(register: Callable[[str, Any], None]) -> None:
    register("sqlite", SQLiteStateBackend)
