"""The state objects user code holds: ValueState and ListState."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any


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
