"""The state objects user code holds: Value, List, Map, Reducing and Aggregating state.

Per-record methods act on the current key (set by the operator for each record). The
batch-level methods of ValueState (``values``, ``update_values``) act on every key of an
Arrow array at once, for functions that work per batch (``KeyedBatchProcessFunction``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa


class ValueState(ABC):
    """One value, scoped to the current key."""

    @abstractmethod
    def value(self) -> Any:
        """The value for the current key, or the descriptor's default."""

    @abstractmethod
    def update(self, value: Any) -> None:
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


class ListState(ABC):
    """A list of values, scoped to the current key (keyed) or the subtask (operator)."""

    @abstractmethod
    def get(self) -> list[Any]:
        """A copy of the values, oldest first; empty if none."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Append one value."""

    def add_all(self, values: Iterable[Any]) -> None:
        """Append several values."""
        for value in values:
            self.add(value)

    @abstractmethod
    def update(self, values: Iterable[Any]) -> None:
        """Replace the values."""

    @abstractmethod
    def clear(self) -> None:
        """Remove every value."""


class MapState(ABC):
    """A map from user keys to values, scoped to the current key."""

    @abstractmethod
    def get(self, key: Any) -> Any:
        """The value of ``key``, or None."""

    @abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Set the value of ``key``."""

    def put_all(self, entries: dict[Any, Any]) -> None:
        """Set several entries."""
        for key, value in entries.items():
            self.put(key, value)

    @abstractmethod
    def remove(self, key: Any) -> None:
        """Remove ``key`` (nothing happens if it is absent)."""

    def pop(self, key: Any) -> Any:
        """The value of ``key``, removed in the same call (None if absent), as ``dict.pop``."""
        value = self.get(key)
        self.remove(key)
        return value

    def contains(self, key: Any) -> bool:
        """True if ``key`` has a value."""
        return key in dict(self.items())

    @abstractmethod
    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every (key, value), in insertion order."""

    def keys(self) -> Iterator[Any]:
        """Every key."""
        return (key for key, _ in self.items())

    def values(self) -> Iterator[Any]:
        """Every value."""
        return (value for _, value in self.items())

    def is_empty(self) -> bool:
        """True if the map has no entries."""
        return next(iter(self.items()), None) is None

    @abstractmethod
    def clear(self) -> None:
        """Remove every entry."""


class ReducingState(ABC):
    """One value per key, folded with the descriptor's reduce function on each add."""

    @abstractmethod
    def get(self) -> Any:
        """The reduced value, or None if nothing was added."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Fold ``value`` in: ``reduce(current, value)``, or ``value`` if there is none."""

    @abstractmethod
    def clear(self) -> None:
        """Forget the reduced value."""


class AggregatingState(ABC):
    """An accumulator per key, built with the descriptor's AggregateFunction."""

    @abstractmethod
    def get(self) -> Any:
        """``get_result`` of the accumulator, or None if nothing was added."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Fold ``value`` into the accumulator (created on the first add)."""

    @abstractmethod
    def clear(self) -> None:
        """Forget the accumulator."""
