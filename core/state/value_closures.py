"""Per-record state calls as closures over the state's table and backend: the hot path
of a KeyedProcessFunction's ``value()`` / ``update()`` and of map state's ``get`` /
``put`` / ``remove`` (windows keep their contents in map state) without attribute
lookups or a separate type-check call for plain ints (``keyed_handles``' handles
without TTL)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pyarrow as pa

from flintlock.core.state.arrow_values import ArrowValue
from flintlock.core.state.type_check import _fast_types


def value_closure(state: Any) -> Callable[[], Any]:
    """``state.value`` as a closure over its table and backend: no attribute lookups on
    the per-record path (the method stays as the reference)."""
    get, backend, default = state._table.get, state._backend, state._default

    def value() -> Any:
        return get(backend.current_key, default)

    return value


def arrow_value_closure(state: Any) -> Callable[[], Any]:
    """``value_closure`` for a state that may hold Arrow rows: a row read per record
    becomes Python and is stored so (the next read, and changes to it, see that object)."""
    table, backend, default = state._table, state._backend, state._default
    get = table.get

    def value() -> Any:
        stored = get(backend.current_key, default)
        if type(stored) is ArrowValue:
            stored = table[backend.current_key] = stored.as_py()
        return stored

    return value


def update_closure(state: Any) -> Callable[[Any], None]:
    """``state.update`` as a closure; a plain int of an integer type is checked inline."""
    table, backend, check = state._table, state._backend, state._check
    arrow_type = state._arrow_type
    if check is None or arrow_type is None or not pa.types.is_integer(arrow_type):
        return partial(type(state).update, state)
    low, high = _fast_types(arrow_type)[1] or (0, -1)

    def update(value: Any) -> None:
        if type(value) is int and low <= value <= high:
            table[backend.current_key] = value
        elif value is None:
            table.pop(backend.current_key, None)
        else:
            check(value)
            table[backend.current_key] = value

    return update


def _int_bounds(check: Any, arrow_type: Any) -> tuple[int, int]:
    """The bounds within which a plain int passes ``check`` without calling it (an empty
    range where the type is not an integer or nothing is checked)."""
    if check is None or arrow_type is None or not pa.types.is_integer(arrow_type):
        return 0, -1
    return _fast_types(arrow_type)[1] or (0, -1)


def map_get_closure(state: Any) -> Callable[[Any], Any]:
    """``MapState.get`` without TTL: the current key's stored dict, then the entry."""
    table_get, backend = state._table.get, state._backend

    def get(key: Any) -> Any:
        stored = table_get(backend.current_key)
        return None if stored is None else stored.get(key)

    return get


def map_put_closure(state: Any, descriptor: Any) -> Callable[[Any, Any], None]:
    """``MapState.put`` without TTL; a plain int key or value of an integer type is
    checked inline. The stored dict is written back (a table may hand out copies)."""
    table, backend = state._table, state._backend
    check_key, check_value = state._check_key, state._check_value
    key_low, key_high = _int_bounds(check_key, getattr(descriptor, "key_type", None))
    low, high = _int_bounds(check_value, descriptor.arrow_type)
    table_get = table.get

    def put(key: Any, value: Any) -> None:
        if check_key is not None and not (type(key) is int and key_low <= key <= key_high):
            check_key(key)
        if (
            check_value is not None
            and value is not None
            and not (type(value) is int and low <= value <= high)
        ):
            check_value(value)
        current = backend.current_key
        stored = table_get(current)
        if stored is None:
            table[current] = {key: value}
        else:
            stored[key] = value
            table[current] = stored

    return put


def map_remove_closure(state: Any) -> Callable[[Any], None]:
    """``MapState.remove`` without TTL; a key left with an empty map is dropped."""
    table, backend = state._table, state._backend
    table_get = table.get

    def remove(key: Any) -> None:
        current = backend.current_key
        stored = table_get(current)
        if stored is not None and key in stored:
            del stored[key]
            if stored:
                table[current] = stored
            else:
                table.pop(current, None)

    return remove


def map_pop_closure(state: Any) -> Callable[[Any], Any]:
    """``get`` then ``remove`` in one call, for an operator that reads an entry for the
    last time (a window firing with no allowed lateness); map state without TTL."""
    table, backend = state._table, state._backend
    table_get = table.get

    def pop(key: Any) -> Any:
        current = backend.current_key
        stored = table_get(current)
        if stored is None or key not in stored:
            return None
        value = stored.pop(key)
        if stored:
            table[current] = stored
        else:
            table.pop(current, None)
        return value

    return pop


def map_closures(state: Any, descriptor: Any) -> dict[str, Callable[..., Any]]:
    """``get``, ``put``, ``remove`` and ``pop`` of map state without TTL, as closures."""
    return {
        "get": map_get_closure(state),
        "put": map_put_closure(state, descriptor),
        "remove": map_remove_closure(state),
        "pop": map_pop_closure(state),
    }
