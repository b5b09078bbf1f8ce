"""Keyed list state, per record and per batch.

A batch-level append (``add_values``) keeps each key's new elements as a slice of the
batch that brought them (an ``ArrowElements``: one Python object per key and batch, none
per element), so appending never reads or rewrites what a key already holds and a
snapshot concatenates slices instead of converting Python rows. This columnar form is
used where the backend keeps objects as they are (``holds_arrow_lists``: ``hashmap``), the
descriptor declares its ``arrow_type`` and there is no TTL (a restore then keeps the
snapshot's lists as slices of the column it read); otherwise elements are Python
values, as the per-record methods store them. A per-record call on a key held as Arrow
turns that key's elements into Python once.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.api.keys import python_keys
from flintlock.core.state.arrow_codec import keys_to_arrow, to_arrow
from flintlock.core.state.descriptors import AnyDescriptor
from flintlock.core.state.handles import ListState
from flintlock.core.state.type_check import type_check

if TYPE_CHECKING:
    from flintlock.core.state.backend import KeyedStateBackend


class ArrowElements:
    """One key's list elements as Arrow arrays of one type, oldest first."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[pa.Array]) -> None:
        self.chunks = chunks

    def __len__(self) -> int:
        return sum(len(chunk) for chunk in self.chunks)

    def to_pylist(self) -> list[Any]:
        """The elements as Python values (struct elements are dicts, as restored ones)."""
        return [value for chunk in self.chunks for value in chunk.to_pylist()]


def key_runs(keys: pa.Array | pa.ChunkedArray) -> tuple[list[Any], np.ndarray, pa.Array]:
    """``keys`` grouped: each distinct key (as Python), the bounds of its run in the
    sorted order, and that order (a stable sort: a key's rows keep their order)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if pa.types.is_struct(keys.type) or keys.null_count:  # Arrow cannot sort a struct
        first: dict[Any, list[int]] = {}
        for row, key in enumerate(python_keys(keys)):
            first.setdefault(key, []).append(row)
        rows = [row for group in first.values() for row in group]
        bounds = np.cumsum([0, *(len(group) for group in first.values())])
        return list(first), bounds, pa.array(rows, pa.int64())
    order = pc.sort_indices(keys)
    ordered = keys.take(order)
    count = len(ordered)
    if count == 0:
        return [], np.zeros(1, dtype=np.int64), order
    changed = pc.not_equal(ordered.slice(1), ordered.slice(0, count - 1))
    starts = np.concatenate([[0], np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1])
    return python_keys(ordered.take(pa.array(starts))), np.append(starts, count), order


def list_column(stored: list[Any], list_type: pa.DataType | None, what: str) -> pa.Array:
    """A list column of ``stored`` (each a Python list or an ``ArrowElements``)."""
    held = next((s for s in stored if isinstance(s, ArrowElements) and s.chunks), None)
    if held is None:
        return to_arrow([elements_of(s) for s in stored], list_type, what)
    if list_type is None:  # no declared type: the type the Arrow-held elements have
        list_type = pa.list_(held.chunks[0].type)
    element_type = list_type.value_type
    pieces: list[pa.Array] = []
    lengths = np.zeros(len(stored), dtype=np.int64)
    pending: list[list[Any]] = []  # Python lists in a row, converted in one call
    for i, elements in enumerate(stored):
        if isinstance(elements, ArrowElements):
            if pending:
                pieces.append(to_arrow(pending, list_type, what).flatten())
                pending = []
            pieces.extend(
                c if c.type == element_type else c.cast(element_type) for c in elements.chunks
            )
        else:
            pending.append(elements)
        lengths[i] = len(elements)
    if pending:
        pieces.append(to_arrow(pending, list_type, what).flatten())
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.concat_arrays(pieces), type=list_type)


def elements_of(stored: Any) -> Any:
    """A stored list as Python (Arrow-held elements converted)."""
    return stored.to_pylist() if isinstance(stored, ArrowElements) else stored


def arrow_elements(column: pa.Array | pa.ChunkedArray) -> list[ArrowElements]:
    """Each row of a list column as the elements of one key, held as Arrow (a restore
    that keeps a snapshot's lists as slices of the column it read)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    held: list[ArrowElements] = []
    for chunk in chunks:
        values, bounds = chunk.values, chunk.offsets.to_numpy().tolist()
        held.extend(
            ArrowElements([values.slice(start, stop - start)]) for start, stop in pairwise(bounds)
        )
    return held


def keys_as_python(keys: pa.Array | pa.ChunkedArray | list[Any]) -> list[Any]:
    """Keys given to a batch method as Python values (a list is taken as it is)."""
    return keys if isinstance(keys, list) else python_keys(keys)


class KeyedListState(ListState[Any]):
    """Keyed list state; with TTL each element expires on its own. Elements are never
    None (as in Flink, where a null element is refused). The batch methods also take
    keys as a Python list (tuples for composite keys), as ValueState's do."""

    def __init__(self, backend: KeyedStateBackend, table: Any, descriptor: AnyDescriptor) -> None:
        self._backend, self._table = backend, table
        self._name = descriptor.name
        self._arrow_type: pa.DataType | None = descriptor.arrow_type
        self._type_check = type_check(descriptor.arrow_type, f"list state '{descriptor.name}'")
        config = descriptor.ttl_config
        self._ttl = config.ttl_ms if config is not None else None
        self._refresh = config is not None and config.refresh_on_read
        self._columnar = backend.holds_arrow_lists and self._arrow_type is not None and not config

    # ---- per record ----

    def _live(self, key: Any) -> list[Any]:
        """The stored elements of ``key`` as Python, expired ones removed (written back)."""
        stored = self._table.get(key)
        if isinstance(stored, ArrowElements):
            stored = self._table[key] = stored.to_pylist()
        if stored is None or self._ttl is None:
            return stored or []
        now = self._backend.ttl_clock()
        live = [pair for pair in stored if pair[1] + self._ttl > now]
        if self._refresh:
            live = [(value, now) for value, _ in live]
        if live != stored:
            self._store(key, live)
        return live

    def _store(self, key: Any, stored: list[Any]) -> None:
        if stored:
            self._table[key] = stored
        else:
            self._table.pop(key, None)

    def get(self) -> list[Any]:
        live = self._live(self._backend.current_key)
        return [value for value, _ in live] if self._ttl is not None else list(live)

    def _check(self, values: list[Any]) -> list[Any]:
        if any(value is None for value in values):
            raise ValueError(f"list state '{self._name}' takes no None elements")
        if self._type_check is not None:
            for value in values:
                self._type_check(value)
        return values

    def add(self, value: Any) -> None:
        self._check([value])
        key = self._backend.current_key
        live = self._live(key)
        live.append((value, self._backend.ttl_clock()) if self._ttl is not None else value)
        self._table[key] = live

    def add_all(self, values: Iterable[Any]) -> None:
        self._extend(self._backend.current_key, self._check(list(values)))

    def _extend(self, key: Any, values: list[Any]) -> None:
        live = self._live(key)
        if self._ttl is not None:
            now = self._backend.ttl_clock()
            live.extend((value, now) for value in values)
        else:
            live.extend(values)
        self._store(key, live)

    def update(self, values: Iterable[Any]) -> None:
        values = self._check(list(values))
        if self._ttl is not None:
            now = self._backend.ttl_clock()
            values = [(value, now) for value in values]
        self._store(self._backend.current_key, values)

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)

    # ---- per batch ----

    def add_values(
        self, keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray
    ) -> None:
        if len(keys) != len(values):
            raise ValueError(
                f"list state '{self._name}': {len(keys)} keys but {len(values)} values"
            )
        if isinstance(keys, list):
            keys = keys_to_arrow(keys, f"keys of list state '{self._name}'")
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if values.null_count:
            raise ValueError(f"list state '{self._name}' takes no None elements")
        if self._arrow_type is not None and values.type != self._arrow_type:
            values = self._cast(values)
        heads, bounds, order = key_runs(keys)
        ordered = values.take(order)
        runs = zip(heads, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
        if not self._columnar:
            for key, start, stop in runs:
                self._extend(key, self._check(ordered.slice(start, stop - start).to_pylist()))
            return
        table, arrow_type = self._table, self._arrow_type
        for key, start, stop in runs:
            added = ordered.slice(start, stop - start)
            stored = table.get(key)
            if stored is None:
                table[key] = ArrowElements([added])
            elif isinstance(stored, ArrowElements):
                stored.chunks.append(added)
            else:
                earlier = to_arrow(stored, arrow_type, f"list state '{self._name}'")
                table[key] = ArrowElements([earlier, added])

    def _cast(self, values: pa.Array) -> pa.Array:
        try:
            return values.cast(self._arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise TypeError(
                f"list state '{self._name}' holds {self._arrow_type}, "
                f"given values of {values.type} ({error})"
            ) from error

    def values(self, keys: pa.Array | pa.ChunkedArray) -> pa.ListArray:
        stored = [self._elements(key) for key in keys_as_python(keys)]
        list_type = pa.list_(self._arrow_type) if self._arrow_type is not None else None
        column = list_column(stored, list_type, f"list state '{self._name}'")
        if not isinstance(column, pa.ListArray):  # no keys, and no type to infer one from
            return pa.array([], pa.list_(pa.null()))
        return column

    def _elements(self, key: Any) -> list[Any] | ArrowElements:
        stored = self._table.get(key)
        if isinstance(stored, ArrowElements):
            return stored
        if self._ttl is None:
            return list(stored or [])
        return [value for value, _ in self._live(key)]

    def clear_values(self, keys: pa.Array | pa.ChunkedArray) -> None:
        pop = self._table.pop
        for key in dict.fromkeys(keys_as_python(keys)):
            pop(key, None)
