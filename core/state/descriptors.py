"""Declare a piece of state by name, kind, (optionally) its Arrow type and its TTL.

State is declared, as in Flink, rather than made ad hoc, so the runtime knows what to
snapshot and restore under each name: the Arrow type fixes how values are stored (and is
checked against a restored snapshot's), and the descriptor types the handle it returns."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import pyarrow as pa

from flintlock.core.state.handles import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)
from flintlock.core.state.ttl import StateTtlConfig

if TYPE_CHECKING:
    from flintlock.core.state.aggregate import AggregateFunction

T = TypeVar("T")
"""The type of a state's values (a list state's elements, a map state's values)."""
K = TypeVar("K")
"""The type of a map state's user keys."""
IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")

StateKind = Literal["value", "list", "map", "reducing", "aggregating"]
HandleT = TypeVar("HandleT")
"""The handle a descriptor's state is read through (``ValueState`` for a value state)."""
DescriptorT = TypeVar("DescriptorT", bound="StateDescriptor[Any]")


@dataclass(frozen=True)
class StateDescriptor(Generic[HandleT]):
    """Name and kind of a state; ``arrow_type`` fixes how it is snapshotted (else inferred);
    ``ttl_config`` makes its entries expire (``StateTtlConfig``)."""

    name: str
    arrow_type: pa.DataType | None = None

    kind: StateKind = "value"
    ttl_config: StateTtlConfig | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ValueError(f"state name {self.name!r} must be non-empty without '/'")
        kind = type(self).__dataclass_fields__["kind"].default
        if self.kind != kind:  # a third positional argument lands in ``kind``
            raise ValueError(
                f"state '{self.name}': {type(self).__name__} takes its other arguments by "
                f"name (default=, ttl_config=), not {self.kind!r} as a third argument"
            )
        if self.arrow_type is not None and not isinstance(self.arrow_type, pa.DataType):
            raise ValueError(
                f"state '{self.name}': arrow_type must be a pyarrow.DataType, not "
                f"{self.arrow_type!r}"
            )
        if self.ttl_config is not None and not isinstance(self.ttl_config, StateTtlConfig):
            raise ValueError(
                f"state '{self.name}': ttl_config must be a StateTtlConfig, not {self.ttl_config!r}"
            )

    def enable_time_to_live(self: DescriptorT, ttl_config: StateTtlConfig) -> DescriptorT:
        """A copy of this descriptor whose entries expire as ``ttl_config`` says."""
        twin = copy.copy(self)
        object.__setattr__(twin, "ttl_config", ttl_config)
        twin.__post_init__()
        return twin


AnyDescriptor = StateDescriptor[Any]
"""A descriptor of any kind of state."""


def _set(descriptor: StateDescriptor[Any], **fields: Any) -> None:
    for name, value in fields.items():
        object.__setattr__(descriptor, name, value)
    descriptor.__post_init__()


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor[ValueState[T]], Generic[T]):
    """One value per key; ``default`` is returned while none is set."""

    default: T | None = None
    kind: StateKind = "value"


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor[ListState[T]], Generic[T]):
    """A list of values per key, or per operator subtask for operator state."""

    kind: StateKind = "list"


@dataclass(frozen=True, init=False)
class MapStateDescriptor(StateDescriptor[MapState[K, T]], Generic[K, T]):
    """A map per key: ``key_type`` and ``arrow_type`` type its keys and values."""

    key_type: pa.DataType | None = None
    kind: StateKind = "map"

    def __init__(
        self,
        name: str,
        key_type: pa.DataType | None = None,
        arrow_type: pa.DataType | None = None,
        ttl_config: StateTtlConfig | None = None,
    ) -> None:
        _set(
            self,
            name=name,
            key_type=key_type,
            arrow_type=arrow_type,
            ttl_config=ttl_config,
            kind="map",
        )


@dataclass(frozen=True, init=False)
class ReducingStateDescriptor(StateDescriptor[ReducingState[T]], Generic[T]):
    """One value per key, folded with ``reduce_function(current, new)`` on every add."""

    reduce_function: Callable[[T, T], T] = None  # type: ignore[assignment]
    kind: StateKind = "reducing"

    def __init__(
        self,
        name: str,
        reduce_function: Callable[[T, T], T],
        arrow_type: pa.DataType | None = None,
        ttl_config: StateTtlConfig | None = None,
    ) -> None:
        if not callable(reduce_function):
            raise ValueError(f"state '{name}': reduce_function must be callable")
        _set(
            self,
            name=name,
            reduce_function=reduce_function,
            arrow_type=arrow_type,
            ttl_config=ttl_config,
            kind="reducing",
        )


@dataclass(frozen=True, init=False)
class AggregatingStateDescriptor(StateDescriptor[AggregatingState[IN, OUT]], Generic[IN, ACC, OUT]):
    """An accumulator per key, built by an ``AggregateFunction``; ``arrow_type`` types the
    accumulator (what is snapshotted), not the result."""

    aggregate_function: AggregateFunction[IN, ACC, OUT] = None  # type: ignore[assignment]
    kind: StateKind = "aggregating"

    def __init__(
        self,
        name: str,
        aggregate_function: AggregateFunction[IN, ACC, OUT],
        arrow_type: pa.DataType | None = None,
        ttl_config: StateTtlConfig | None = None,
    ) -> None:
        from flintlock.core.state.aggregate import AggregateFunction

        if not isinstance(aggregate_function, AggregateFunction):
            raise ValueError(
                f"state '{name}': aggregate_function must be an AggregateFunction, not "
                f"{type(aggregate_function).__name__}"
            )
        _set(
            self,
            name=name,
            aggregate_function=aggregate_function,
            arrow_type=arrow_type,
            ttl_config=ttl_config,
            kind="aggregating",
        )
