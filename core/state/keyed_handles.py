"""Keyed state handles over a backend's table: one implementation for every backend.

A *table* maps a key to its stored value; a dict is one (``hashmap``), and the ``sqlite``
backend's tables offer the same few methods (``get``, ``__setitem__``, ``pop``, and for
batches ``get_many`` / ``set_many`` / ``delete_many``). Stored values: the value (value,
reducing, aggregating), a list (list; or Arrow slices, ``keyed_lists``) or a dict (map);
with TTL each value, list element or map entry is a ``(value, last_access_ms)`` pair.
Mutable stored values are always written back, so a table may hand out copies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.state.arrow_values import (
    ArrowValue,
    arrow_values,
    holds_as_arrow,
    value_column,
)
from flintlock.core.state.descriptors import (
    AggregatingStateDescriptor,
    AnyDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from flintlock.core.state.handles import (
    AggregatingState,
    MapState,
    ReducingState,
    ValueState,
)
from flintlock.core.state.keyed_lists import KeyedListState, keys_as_python
from flintlock.core.state.type_check import type_check
from flintlock.core.state.value_closures import (
    arrow_value_closure,
    map_closures,
    update_closure,
    value_closure,
)

if TYPE_CHECKING:
    from flintlock.core.state.backend import KeyedStateBackend


def get_many(table: Any, keys: list[Any]) -> list[Any]:
    """The stored value of each key (None where there is none)."""
    many: Callable[[list[Any]], list[Any]] | None = getattr(table, "get_many", None)
    if many is not None:
        return many(keys)
    get = table.get
    return [get(key) for key in keys]


def set_many(table: Any, entries: dict[Any, Any]) -> None:
    """Store several (key, stored value) entries."""
    store = getattr(table, "set_many", None) or table.update  # a dict has no set_many
    store(entries)


def delete_many(table: Any, keys: Iterable[Any]) -> None:
    """Remove several keys."""
    many = getattr(table, "delete_many", None)
    if many is not None:
        many(list(keys))
    else:
        for key in keys:
            table.pop(key, None)


def _values(array: pa.Array | pa.ChunkedArray | list[Any]) -> list[Any]:
    """Values as Python: struct rows are dicts, as restored ones are (keys are tuples)."""
    return array if isinstance(array, list) else array.to_pylist()


class _ValueState(ValueState[Any]):
    """Value state without TTL: the per-record hot path (one dict lookup per call). On a
    backend that holds Arrow, nested values written a batch at a time stay Arrow rows."""

    __slots__ = ("_arrow_type", "_backend", "_check", "_default", "_table", "_what", "arrow_held")

    def __init__(self, backend: KeyedStateBackend, table: Any, descriptor: Any) -> None:
        self._backend, self._table = backend, table
        self._default = descriptor.default
        self._arrow_type = descriptor.arrow_type
        self._what = f"value state '{descriptor.name}'"
        self._check = type_check(descriptor.arrow_type, self._what)
        self.arrow_held = backend.holds_arrow_lists and (
            holds_as_arrow(self._arrow_type) or descriptor.name in backend.arrow_valued
        )
        value = (arrow_value_closure if self.arrow_held else value_closure)(self)
        self.__dict__.update(value=value, update=update_closure(self))

    def value(self) -> Any:
        key = self._backend.current_key
        stored = self._table.get(key, self._default)
        if type(stored) is ArrowValue:  # a row read per record is stored as Python
            stored = self._table[key] = stored.as_py()
        return stored

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            if self._check is not None:
                self._check(value)
            self._table[self._backend.current_key] = value

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)

    def values(self, keys: pa.Array | pa.ChunkedArray) -> pa.Array:
        default = self._default
        stored = get_many(self._table, keys_as_python(keys))
        if default is not None:
            stored = [default if s is None else s for s in stored]
        if self.arrow_held:
            return value_column(stored, self._arrow_type, self._what)
        return pa.array(stored, type=self._arrow_type)

    def update_values(
        self, keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray
    ) -> None:
        arrow_type = self._arrow_type
        if self.arrow_held and arrow_type is not None and not isinstance(values, list):
            rows = arrow_values(values, arrow_type)
        else:
            rows = _values(values)
        latest = dict(zip(keys_as_python(keys), rows, strict=True))
        cleared = [key for key, value in latest.items() if value is None]
        for key in cleared:
            del latest[key]
        set_many(self._table, latest)
        delete_many(self._table, cleared)


class _Cell:
    """One stored value per key with TTL: expired values are never returned and are
    removed when read; a read refreshes the timestamp under OnReadAndWrite."""

    __slots__ = ("_backend", "_refresh", "_table", "_ttl")

    def __init__(self, backend: KeyedStateBackend, table: Any, descriptor: AnyDescriptor) -> None:
        config = descriptor.ttl_config
        assert config is not None
        self._backend, self._table = backend, table
        self._ttl, self._refresh = config.ttl_ms, config.refresh_on_read

    def read_stored(self, key: Any, stored: Any, now: int) -> Any:
        """The live value of ``stored`` (a (value, ts) pair or None) for ``key``, or None."""
        if stored is None:
            return None
        value, stamp = stored
        if stamp + self._ttl <= now:
            self._table.pop(key, None)
            return None
        if self._refresh and stamp != now:
            self._table[key] = (value, now)
        return value

    def read(self) -> Any:
        key = self._backend.current_key
        return self.read_stored(key, self._table.get(key), self._backend.ttl_clock())

    def write(self, value: Any) -> None:
        self._table[self._backend.current_key] = (value, self._backend.ttl_clock())

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)


class _PlainCell(_Cell):
    """A stored value per key without TTL (reducing and aggregating state)."""

    def __init__(self, backend: KeyedStateBackend, table: Any, descriptor: AnyDescriptor) -> None:
        self._backend, self._table = backend, table

    def read(self) -> Any:
        return self._table.get(self._backend.current_key)

    def write(self, value: Any) -> None:
        self._table[self._backend.current_key] = value


def _cell(backend: KeyedStateBackend, table: Any, descriptor: AnyDescriptor) -> _Cell:
    kind = _Cell if descriptor.ttl_config is not None else _PlainCell
    return kind(backend, table, descriptor)


class _TtlValueState(ValueState[Any]):
    """Value state with TTL."""

    def __init__(self, backend: KeyedStateBackend, table: Any, descriptor: Any) -> None:
        self._backend, self._table = backend, table
        self._cell = _Cell(backend, table, descriptor)
        self._default = descriptor.default
        self._arrow_type = descriptor.arrow_type
        self._check = type_check(descriptor.arrow_type, f"value state '{descriptor.name}'")

    def value(self) -> Any:
        found = self._cell.read()
        return self._default if found is None else found

    def update(self, value: Any) -> None:
        if value is None:
            self._cell.clear()
        else:
            if self._check is not None:
                self._check(value)
            self._cell.write(value)

    def clear(self) -> None:
        self._cell.clear()

    def values(self, keys: pa.Array | pa.ChunkedArray) -> pa.Array:
        keys = keys_as_python(keys)
        now, read, default = self._backend.ttl_clock(), self._cell.read_stored, self._default
        found = [read(k, s, now) for k, s in zip(keys, get_many(self._table, keys), strict=True)]
        return pa.array([default if v is None else v for v in found], type=self._arrow_type)

    def update_values(
        self, keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray
    ) -> None:
        now = self._backend.ttl_clock()
        latest = dict(zip(keys_as_python(keys), _values(values), strict=True))
        cleared = [key for key, value in latest.items() if value is None]
        set_many(self._table, {k: (v, now) for k, v in latest.items() if v is not None})
        delete_many(self._table, cleared)


_CURRENT = object()
"""The current key (a key given to a batch method may be None)."""


class _MapState(MapState[Any, Any]):
    """Keyed map state; with TTL each entry expires on its own."""

    def __init__(self, backend: KeyedStateBackend, table: Any, descriptor: AnyDescriptor) -> None:
        self._backend, self._table = backend, table
        what = f"map state '{descriptor.name}'"
        self._key_type = getattr(descriptor, "key_type", None)
        self._type = descriptor.arrow_type
        self._check_key = type_check(self._key_type, f"the keys of {what}")
        self._check_value = type_check(descriptor.arrow_type, f"the values of {what}")
        config = descriptor.ttl_config
        self._ttl = config.ttl_ms if config is not None else None
        self._refresh = config is not None and config.refresh_on_read
        if self._ttl is None:  # the per-record hot path (windows' contents) as closures
            self.__dict__.update(map_closures(self, descriptor))

    def _live(self, key: Any = _CURRENT) -> dict[Any, Any]:
        """The key's (by default the current key's) stored map, expired entries removed
        (and written back)."""
        key = self._backend.current_key if key is _CURRENT else key
        stored: dict[Any, Any] | None = self._table.get(key)
        if stored is None:
            return {}
        if self._ttl is None:
            return stored
        now, ttl = self._backend.ttl_clock(), self._ttl
        live = {k: pair for k, pair in stored.items() if pair[1] + ttl > now}
        if self._refresh:
            live = {k: (value, now) for k, (value, _) in live.items()}
        if live != stored:
            self._store(live, key)
        return live

    def _store(self, stored: dict[Any, Any], key: Any = _CURRENT) -> None:
        key = self._backend.current_key if key is _CURRENT else key
        if stored:
            self._table[key] = stored
        else:
            self._table.pop(key, None)

    def get(self, key: Any) -> Any:
        entry = self._live().get(key)
        return entry[0] if entry is not None and self._ttl is not None else entry

    def put(self, key: Any, value: Any) -> None:
        if self._check_key is not None:
            self._check_key(key)
        if self._check_value is not None and value is not None:
            self._check_value(value)
        live = self._live()
        live[key] = (value, self._backend.ttl_clock()) if self._ttl is not None else value
        self._store(live)

    def remove(self, key: Any) -> None:
        live = self._live()
        if key in live:
            del live[key]
            self._store(live)

    def contains(self, key: Any) -> bool:
        return key in self._live()

    def items(self) -> Iterator[tuple[Any, Any]]:
        live = self._live()
        if self._ttl is None:
            return iter(list(live.items()))
        return iter([(key, pair[0]) for key, pair in live.items()])

    def is_empty(self) -> bool:
        return not self._live()

    # ---- a batch at a time: each key's map read (and written) once ----

    def contains_entries(
        self, keys: pa.Array | pa.ChunkedArray, map_keys: pa.Array | pa.ChunkedArray
    ) -> pa.BooleanArray:
        owners, entries = keys_as_python(keys), self._entries(map_keys, self._key_type)
        maps = {key: self._live(key) for key in dict.fromkeys(owners)}
        found = [entry in maps[key] for key, entry in zip(owners, entries, strict=True)]
        return pa.array(found, pa.bool_())

    def put_entries(
        self,
        keys: pa.Array | pa.ChunkedArray,
        map_keys: pa.Array | pa.ChunkedArray,
        values: pa.Array | pa.ChunkedArray | None = None,
    ) -> None:
        owners, entries = keys_as_python(keys), self._entries(map_keys, self._key_type)
        given = [None] * len(owners) if values is None else self._entries(values, self._type)
        stamp = self._backend.ttl_clock() if self._ttl is not None else None
        maps = {key: self._live(key) for key in dict.fromkeys(owners)}
        for key, entry, value in zip(owners, entries, given, strict=True):
            maps[key][entry] = value if stamp is None else (value, stamp)
        set_many(self._table, maps)

    def sizes(self, keys: pa.Array | pa.ChunkedArray) -> pa.Int64Array:
        owners = keys_as_python(keys)
        counts = {key: len(self._live(key)) for key in dict.fromkeys(owners)}
        return pa.array([counts[key] for key in owners], pa.int64())

    def _entries(self, array: pa.Array | pa.ChunkedArray | list[Any], arrow_type: Any) -> list[Any]:
        """Map keys or values as Python, of the descriptor's type where it declares one (a
        list is taken as it is, as batch methods take keys)."""
        if isinstance(array, list):
            return array
        if arrow_type is not None and array.type != arrow_type:
            array = array.cast(arrow_type)
        return array.to_pylist()  # type: ignore[no-any-return]

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)


class _ReducingState(ReducingState[Any]):
    def __init__(self, backend: KeyedStateBackend, table: Any, descriptor: Any) -> None:
        self._cell = _cell(backend, table, descriptor)
        self._reduce = descriptor.reduce_function

    def get(self) -> Any:
        return self._cell.read()

    def add(self, value: Any) -> None:
        current = self._cell.read()
        self._cell.write(value if current is None else self._reduce(current, value))

    def clear(self) -> None:
        self._cell.clear()


class _AggregatingState(AggregatingState[Any, Any]):
    def __init__(self, backend: KeyedStateBackend, table: Any, descriptor: Any) -> None:
        self._cell = _cell(backend, table, descriptor)
        self._function = descriptor.aggregate_function

    def get(self) -> Any:
        accumulator = self._cell.read()
        return None if accumulator is None else self._function.get_result(accumulator)

    def add(self, value: Any) -> None:
        accumulator = self._cell.read()
        if accumulator is None:
            accumulator = self._function.create_accumulator()
        self._cell.write(self._function.add(value, accumulator))

    def clear(self) -> None:
        self._cell.clear()


def make_handle(backend: KeyedStateBackend, table: Any, descriptor: AnyDescriptor) -> Any:
    """The handle user code gets for ``descriptor``, over ``table``."""
    if isinstance(descriptor, ValueStateDescriptor):
        kind = _ValueState if descriptor.ttl_config is None else _TtlValueState
        return kind(backend, table, descriptor)
    if isinstance(descriptor, ReducingStateDescriptor):
        return _ReducingState(backend, table, descriptor)
    if isinstance(descriptor, AggregatingStateDescriptor):
        return _AggregatingState(backend, table, descriptor)
    if descriptor.kind == "map":
        return _MapState(backend, table, descriptor)
    if descriptor.kind == "list":
        return KeyedListState(backend, table, descriptor)
    raise ValueError(f"state '{descriptor.name}' has an unknown kind {descriptor.kind!r}")
