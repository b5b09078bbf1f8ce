"""A keyed state backend built on tables (key -> stored value): handles, snapshot, restore.

Subclasses say only where a state's entries live: ``new_table`` (a dict for ``hashmap``,
an SQLite table for ``sqlite``), ``table_chunks`` (its entries, in bounded chunks) and
``load`` (restored entries). Handles, TTL, the snapshot file layout (``state_files``) and
key-group filtering on restore are shared, so every backend behaves the same.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Hashable, Iterator
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from flintlock.core.checkpoint.snapshots import StateFile
from flintlock.core.checkpoint.storage import CheckpointStorage, safe_name
from flintlock.core.errors import CheckpointError, StateError, StorageError
from flintlock.core.state.arrow_values import repoint, restores_as_arrow
from flintlock.core.state.backend import KeyedStateBackend
from flintlock.core.state.descriptors import HandleT, MapStateDescriptor, StateDescriptor
from flintlock.core.state.keyed_handles import make_handle
from flintlock.core.state.state_files import (
    RestoredEntries,
    decode,
    encode,
    has_ttl,
    owned_rows,
)

Chunk = tuple[list[Any], list[Any], "np.ndarray | list[int] | None"]
"""Keys, their stored values and (if the table knows them) their key groups."""

TableT = TypeVar("TableT")
"""A backend's table: dict-like (``get``, ``__setitem__``, ``pop``), e.g. a dict."""


class TableKeyedStateBackend(KeyedStateBackend, Generic[TableT]):
    """Keyed state as one table per state, written one Arrow IPC file per state."""

    memory_map_restore = True
    """Read local state files memory-mapped on restore (no copy). A backend that bounds
    its memory sets False: mapped pages stay resident until the file is closed."""

    def __init__(self, key_groups: range, max_parallelism: int) -> None:
        super().__init__(key_groups, max_parallelism)
        self._tables: dict[str, TableT] = {}
        self._descriptors: dict[str, StateDescriptor[Any]] = {}
        self._handles: dict[str, Any] = {}
        self._restored: dict[str, tuple[str, bool]] = {}  # name -> (kind, had a TTL)

    # ---- what a subclass provides ----

    @abstractmethod
    def new_table(self, name: str) -> TableT:
        """An empty table for state ``name`` (dict-like: get, __setitem__, pop)."""

    @abstractmethod
    def table_chunks(self, name: str, table: TableT) -> Iterator[Chunk]:
        """Every entry of ``table``, in chunks of bounded size."""

    @abstractmethod
    def load(self, name: str, table: TableT, entries: RestoredEntries) -> None:
        """Add restored entries to ``table`` (iterate them for (key group, key, stored
        value) triples, or read their columns ``groups``, ``keys``, ``stored``)."""

    # ---- the KeyedStateBackend interface ----

    def get_state(self, descriptor: StateDescriptor[HandleT]) -> HandleT:
        name = descriptor.name
        known = self._descriptors.get(name)
        if known is not None and known.kind != descriptor.kind:
            raise StateError(
                f"state '{name}' is a {known.kind} state, asked for as {descriptor.kind}"
            )
        handle: HandleT | None = self._handles.get(name)
        if handle is not None:
            return handle
        restored = self._restored.get(name)
        if restored is not None:
            kind, had_ttl = restored
            if kind != descriptor.kind:
                raise StateError(
                    f"state '{name}' was restored as a {kind} state, asked for as {descriptor.kind}"
                )
            if had_ttl != (descriptor.ttl_config is not None):
                was, now = ("with", "without") if had_ttl else ("without", "with")
                raise StateError(
                    f"state '{name}' was snapshotted {was} a TTL and is declared {now} one; "
                    f"enabling or disabling TTL on existing state is not supported (as in Flink)"
                )
        handle = make_handle(self, self._table(name), descriptor)
        if getattr(handle, "arrow_held", False):
            self.arrow_valued.add(name)
        self._handles[name] = handle
        self._descriptors[name] = descriptor
        return handle

    def state_keys(self, name: str) -> Iterator[Hashable]:
        table = self._tables.get(name)
        if table is not None:
            for keys, _, _ in self.table_chunks(name, table):
                yield from keys

    def snapshot(self, storage: CheckpointStorage, directory: str) -> list[StateFile]:
        files = []
        now = self.ttl_clock()
        for name, table in self._tables.items():
            descriptor = self._descriptors.get(name)
            if descriptor is not None:
                kind: str = descriptor.kind
                ttl = descriptor.ttl_config.ttl_ms if descriptor.ttl_config else None
                key_type = (
                    descriptor.key_type if isinstance(descriptor, MapStateDescriptor) else None
                )
                types = (descriptor.arrow_type, key_type)
            else:
                kind, had_ttl = self._restored.get(name, ("value", False))
                ttl, types = (2**62 if had_ttl else None), (None, None)  # keep restored stamps
            batches = self._encoded(name, table, kind, types, ttl, now)
            path = f"{directory}/keyed-{safe_name(name)}.arrow"
            if write_batches(storage, path, batches):
                files.append(StateFile(name, kind, path))
        return files

    def _encoded(
        self,
        name: str,
        table: TableT,
        kind: str,
        types: tuple[pa.DataType | None, pa.DataType | None],
        ttl: int | None,
        now: int,
    ) -> Iterator[pa.RecordBatch | None]:
        """The batches of state ``name``'s file; a value state holding Arrow rows is
        re-pointed at the column written, so the batches its rows came from can go."""
        held = kind == "value" and ttl is None and name in self.arrow_valued
        for keys, stored, groups in self.table_chunks(name, table):
            batch = encode(
                name, kind, keys, stored, groups, self.max_parallelism, types, ttl, now, held
            )
            if held and batch is not None:
                fresh = repoint(stored, batch.column("value"))
                if fresh:
                    rows = list(fresh)
                    groups_of = batch.column("key_group").take(pa.array(rows)).to_pylist()
                    moved = [keys[index] for index in rows]
                    self.load(name, table, RestoredEntries(groups_of, moved, list(fresh.values())))
            yield batch

    def restore(self, storage: CheckpointStorage, files: list[StateFile]) -> None:
        for file in files:
            for batch in read_batches(storage, file.path, self.memory_map_restore):
                data = owned_rows(pa.Table.from_batches([batch]), self.key_groups)
                ttl = has_ttl(data)
                known = self._restored.setdefault(file.name, (file.kind, ttl))
                if known != (file.kind, ttl):
                    raise StateError(
                        f"state '{file.name}' is a {file.kind} state in {file.path} but a "
                        f"{known[0]} state in another file of the same checkpoint"
                    )
                if data.num_rows:
                    entries = decode(file.kind, data, self.holds_arrow_lists)
                    if restores_as_arrow(file.kind, data, self.holds_arrow_lists):
                        self.arrow_valued.add(file.name)
                    self.load(file.name, self._table(file.name), entries)

    def _table(self, name: str) -> TableT:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = self.new_table(name)
        return table


def read_batches(
    storage: CheckpointStorage, path: str, memory_map: bool = True
) -> Iterator[pa.RecordBatch]:
    """The batches of an Arrow IPC state file, one at a time (restore stays memory bounded);
    a missing or damaged file is a CheckpointError naming it."""
    try:
        with _open_for_reading(storage, path, memory_map) as source:
            reader = pa.ipc.open_file(source)
            for index in range(reader.num_record_batches):
                yield reader.get_batch(index)
    except FileNotFoundError as error:
        raise CheckpointError(f"the Arrow file {path} is missing") from error
    except (pa.ArrowInvalid, OSError) as error:
        raise CheckpointError(f"the Arrow file {path} is damaged: {error}") from error


def _open_for_reading(storage: CheckpointStorage, path: str, memory_map: bool) -> pa.NativeFile:
    """A local file is memory-mapped if asked (its batches are read in place, no copy)."""
    if memory_map and isinstance(storage.filesystem, pafs.LocalFileSystem):
        return pa.memory_map(path)
    return storage.filesystem.open_input_file(path)


def write_batches(
    storage: CheckpointStorage, path: str, batches: Iterator[pa.RecordBatch | None]
) -> bool:
    """Stream ``batches`` into one Arrow IPC file at ``path``; False (no file) if all empty.

    The first batch fixes the schema; later ones are cast to it (types inferred per chunk
    may differ, e.g. int64 then null). A failed write (the store refused it, the disk is
    full) is a StorageError naming the file, not the file system's bare OSError."""
    try:
        return _stream_batches(storage, path, batches)
    except StorageError:
        raise
    except OSError as error:
        raise StorageError(f"cannot write {path}: {error}") from error


def _stream_batches(
    storage: CheckpointStorage, path: str, batches: Iterator[pa.RecordBatch | None]
) -> bool:
    writer = sink = schema = None
    written = False
    try:
        for batch in batches:
            if batch is None or batch.num_rows == 0:
                continue
            if writer is None:
                sink = storage.output_stream(path)
                schema = batch.schema
                writer = pa.ipc.new_file(sink, schema)
            elif batch.schema != schema:
                batch = pa.Table.from_batches([batch]).cast(schema).to_batches()[0]
            writer.write_batch(batch)
        written = True
    finally:
        if writer is not None:
            writer.close()
        if sink is not None:
            storage.close_output_stream(path, sink, written)
    return writer is not None
