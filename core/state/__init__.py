"""Managed state: descriptors, state handles, backends, and operator state."""

from flintlock.core.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from flintlock.core.state.handles import ListState, ValueState

__all__ = ["ListState", "ListStateDescriptor", "ValueState", "ValueStateDescriptor"]
