"""The state objects user code holds: Value, List, Map, Reducing and Aggregating state.

Per-record methods act on the current key (set by the operator for each record). The
batch-level methods of ValueState (``values``, ``update_values``), of keyed ListState
(``values``, ``add_values``, ``clear_values``) and of keyed MapState (``contains_entries``,
``put_entries``, ``sizes``) act on every key of an Arrow array at once, for functions
that work per batch (``KeyedBatchProcessFunction``, batch operators).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

import pyarrow as pa

T = TypeVar("T")
"""The type of a state's values (of a list state's elements)."""
K = TypeVar("K")
"""The type of a map state's user keys."""
IN = TypeVar("IN")
OUT = TypeVar("OUT")


class ValueState(ABC, Generic[T]):
    """One value, scoped to the current key (``T`` holds None where the descriptor has no
    default: ``ValueStateDescriptor[int | None]``)."""

    @abstractmethod
    def value(self) -> T:
        """The value for the current key, or the descriptor's default."""

    @abstractmethod
    def update(self, value: T | None) -> None:
        """Set the value for the current key (``None`` clears it)."""

    @abstractmethod
    def clear(self) -> None:
        """Remove the value for the current key."""

    def values(self, keys: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The value of each key of ``keys`` (the default where none is set), as Arrow."""
        raise NotImplementedError(f"{type(self).__name__} has no batch-level access")

    def update_values(
        self, keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray
    ) -> None:
        """Set the value of each key (row by row: the last row of a key wins; null clears)."""
        raise NotImplementedError(f"{type(self).__name__} has no batch-level access")


class ListState(ABC, Generic[T]):
    """A list of values, scoped to the current key (keyed) or the subtask (operator)."""

    @abstractmethod
    def get(self) -> list[T]:
        """A copy of the values, oldest first; empty if none."""

    @abstractmethod
    def add(self, value: T) -> None:
        """Append one value."""

    def add_all(self, values: Iterable[T]) -> None:
        """Append several values."""
        for value in values:
            self.add(value)

    @abstractmethod
    def update(self, values: Iterable[T]) -> None:
        """Replace the values."""

    @abstractmethod
    def clear(self) -> None:
        """Remove every value."""

    def values(self, keys: pa.Array | pa.ChunkedArray) -> pa.ListArray:
        """Each key's list (empty where there is none), one list per row of ``keys``."""
        raise NotImplementedError(f"{type(self).__name__} has no batch-level access")

    def add_values(
        self, keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray
    ) -> None:
        """Append ``values[i]`` to the list of ``keys[i]``; a key's rows keep their order.
        Nothing already in a list is read or rewritten (declare the descriptor's
        ``arrow_type`` and the ``hashmap`` backend keeps the rows as Arrow)."""
        raise NotImplementedError(f"{type(self).__name__} has no batch-level access")

    def clear_values(self, keys: pa.Array | pa.ChunkedArray) -> None:
        """Remove the list of every key in ``keys``."""
        raise NotImplementedError(f"{type(self).__name__} has no batch-level access")


class MapState(ABC, Generic[K, T]):
    """A map from user keys to values, scoped to the current key."""

    @abstractmethod
    def get(self, key: K) -> T | None:
        """The value of ``key``, or None."""

    @abstractmethod
    def put(self, key: K, value: T) -> None:
        """Set the value of ``key``."""

    def put_all(self, entries: Mapping[K, T]) -> None:
        """Set several entries."""
        for key, value in entries.items():
            self.put(key, value)

    @abstractmethod
    def remove(self, key: K) -> None:
        """Remove ``key`` (nothing happens if it is absent)."""

    def pop(self, key: K) -> T | None:
        """The value of ``key``, removed in the same call (None if absent), as ``dict.pop``."""
        value = self.get(key)
        self.remove(key)
        return value

    def contains(self, key: K) -> bool:
        """True if ``key`` has a value."""
        return key in dict(self.items())

    @abstractmethod
    def items(self) -> Iterator[tuple[K, T]]:
        """Every (key, value), in insertion order."""

    def keys(self) -> Iterator[K]:
        """Every key."""
        return (key for key, _ in self.items())

    def values(self) -> Iterator[T]:
        """Every value."""
        return (value for _, value in self.items())

    def is_empty(self) -> bool:
        """True if the map has no entries."""
        return next(iter(self.items()), None) is None

    @abstractmethod
    def clear(self) -> None:
        """Remove every entry."""

    def contains_entries(
        self, keys: pa.Array | pa.ChunkedArray, map_keys: pa.Array | pa.ChunkedArray
    ) -> pa.BooleanArray:
        """Whether the map of ``keys[i]`` has the entry ``map_keys[i]``, per row (a set
        per key, as for a distinct count, without a Python call per row)."""
        raise NotImplementedError(f"{type(self).__name__} has no batch-level access")

    def put_entries(
        self,
        keys: pa.Array | pa.ChunkedArray,
        map_keys: pa.Array | pa.ChunkedArray,
        values: pa.Array | pa.ChunkedArray | None = None,
    ) -> None:
        """Set entry ``map_keys[i]`` of the map of ``keys[i]`` to ``values[i]`` (None
        without ``values``); a later row of the same entry wins."""
        raise NotImplementedError(f"{type(self).__name__} has no batch-level access")

    def sizes(self, keys: pa.Array | pa.ChunkedArray) -> pa.Int64Array:
        """The number of entries in the map of each key."""
        raise NotImplementedError(f"{type(self).__name__} has no batch-level access")


class ReducingState(ABC, Generic[T]):
    """One value per key, folded with the descriptor's reduce function on each add."""

    @abstractmethod
    def get(self) -> T | None:
        """The reduced value, or None if nothing was added."""

    @abstractmethod
    def add(self, value: T) -> None:
        """Fold ``value`` in: ``reduce(current, value)``, or ``value`` if there is none."""

    @abstractmethod
    def clear(self) -> None:
        """Forget the reduced value."""


class AggregatingState(ABC, Generic[IN, OUT]):
    """An accumulator per key, built with the descriptor's AggregateFunction: ``IN`` is
    what is added, ``OUT`` what ``get`` returns."""

    @abstractmethod
    def get(self) -> OUT | None:
        """``get_result`` of the accumulator, or None if nothing was added."""

    @abstractmethod
    def add(self, value: IN) -> None:
        """Fold ``value`` into the accumulator (created on the first add)."""

    @abstractmethod
    def clear(self) -> None:
        """Forget the accumulator."""
