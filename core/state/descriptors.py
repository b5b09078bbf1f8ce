"""Declare a piece of state by name, kind and (optionally) its Arrow type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

StateKind = Literal["value", "list"]


@dataclass(frozen=True)
class StateDescriptor:
    """Name and kind of a state; ``arrow_type`` fixes how it is snapshotted (else inferred)."""

    name: str
    arrow_type: pa.DataType | None = None

    kind: StateKind = "value"

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"state name {self.name!r} must be non-empty without '/'")


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor):
    """One value per key; ``default`` is returned while none is set."""

    default: Any = None
    kind: StateKind = "value"


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor):
    """A list of values per key, or per operator subtask for operator state."""

    kind: StateKind = "list"
