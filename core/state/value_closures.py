"""Per-record value state calls as closures over the state's table and backend: the
hot path of a KeyedProcessFunction's ``value()`` / ``update()`` without attribute
lookups or a separate type-check call for plain ints (``keyed_handles._ValueState``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pyarrow as pa

from flintlock.core.state.type_check import _fast_types


def value_closure(state: Any) -> Callable[[], Any]:
    """``state.value`` as a closure over its table and backend: no attribute lookups on
    the per-record path (the method stays as the reference)."""
    get, backend, default = state._table.get, state._backend, state._default

    def value() -> Any:
        return get(backend.current_key, default)

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
