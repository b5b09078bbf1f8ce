"""Managed state: descriptors, state handles, TTL, backends, and operator state."""

from flintlock.core.runtime.processing_time import ManualClock
from flintlock.core.state.aggregate import AggregateFunction
from flintlock.core.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from flintlock.core.state.handles import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)
from flintlock.core.state.ttl import StateTtlConfig, StateVisibility, UpdateType

__all__ = [
    "AggregateFunction",
    "AggregatingState",
    "AggregatingStateDescriptor",
    "ListState",
    "ListStateDescriptor",
    "ManualClock",
    "MapState",
    "MapStateDescriptor",
    "ReducingState",
    "ReducingStateDescriptor",
    "StateDescriptor",
    "StateTtlConfig",
    "StateVisibility",
    "UpdateType",
    "ValueState",
    "ValueStateDescriptor",
]
