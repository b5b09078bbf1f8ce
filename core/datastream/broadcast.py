"""The broadcast state pattern (Flink's): ``rules = stream.broadcast(descriptor)``, then
``events.connect(rules).process(fn)``: every subtask of the operator sees every
broadcast row and keeps the same broadcast state; the other input reads it.

The broadcast input's edge uses the BROADCAST partitioner, and only
``process_broadcast_element`` may write the state (the other side gets it read-only),
because every subtask's copy stays equal only if every subtask makes the same writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pyarrow as pa

from flintlock.core.api.functions import Collector, Function, Row
from flintlock.core.errors import GraphError
from flintlock.core.exchange.partitioners import BROADCAST
from flintlock.core.state.descriptors import MapStateDescriptor, StateDescriptor
from flintlock.core.state.operator_state import BroadcastState, ReadOnlyBroadcastState

if TYPE_CHECKING:
    from flintlock.core.datastream.datastream import DataStream

K = TypeVar("K")
V = TypeVar("V")


class BroadcastOperator(Protocol):
    """What a ``BroadcastContext`` reads of the operator that calls the function."""

    current_watermark: int

    def broadcast_state(self, descriptor: StateDescriptor[Any]) -> BroadcastState[Any, Any]: ...


class BroadcastContext:
    """What a broadcast process function's call sees: the broadcast state (writable only
    from ``process_broadcast_element``), the key (keyed functions) and the timestamp."""

    __slots__ = ("_key", "_operator", "_timestamp", "_writable")

    def __init__(self, operator: BroadcastOperator, writable: bool) -> None:
        self._operator = operator
        self._writable = writable
        self._key: Any = None
        self._timestamp: int | None = None

    def get_broadcast_state(
        self, descriptor: MapStateDescriptor[K, V]
    ) -> BroadcastState[K, V] | ReadOnlyBroadcastState[K, V]:
        """The broadcast state ``descriptor`` names (declared on ``broadcast(...)``)."""
        state = self._operator.broadcast_state(descriptor)
        return state if self._writable else ReadOnlyBroadcastState(state)

    def get_current_key(self) -> Any:
        """The current key (keyed functions, non-broadcast side)."""
        return self._key

    def timestamp(self) -> int | None:
        """The row's event time, if its stream has one."""
        return self._timestamp

    def current_watermark(self) -> int:
        """The operator's event-time watermark."""
        return self._operator.current_watermark


class BroadcastProcessFunction(Function):
    """A non-keyed stream connected with a broadcast stream."""

    def process_element(self, value: Row, ctx: BroadcastContext, out: Collector) -> None:
        """A row of the non-broadcast input; the broadcast state is read-only here."""
        raise NotImplementedError(f"{type(self).__name__} must override process_element")

    def process_broadcast_element(self, value: Row, ctx: BroadcastContext, out: Collector) -> None:
        """A row of the broadcast input, seen by every subtask; update the state here."""
        raise NotImplementedError(f"{type(self).__name__} must override process_broadcast_element")


class KeyedBroadcastProcessFunction(BroadcastProcessFunction):
    """A keyed stream connected with a broadcast stream: keyed state on the keyed side."""


class BroadcastStream:
    """A stream sent whole to every subtask, with the broadcast states it may write."""

    def __init__(self, stream: DataStream, descriptors: tuple[StateDescriptor[Any], ...]) -> None:
        for descriptor in descriptors:
            if not isinstance(descriptor, StateDescriptor):
                raise GraphError(
                    f"broadcast(...) takes state descriptors (MapStateDescriptor), not "
                    f"{descriptor!r}"
                )
        self.stream = stream
        self.descriptors = descriptors


class BroadcastConnectedStream:
    """``stream.connect(broadcast_stream)``: ``process`` with a broadcast function."""

    def __init__(self, stream: DataStream, broadcast: BroadcastStream) -> None:
        self.stream = stream
        self.broadcast = broadcast

    def process(
        self,
        function: BroadcastProcessFunction,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """Run ``function``: keyed (KeyedBroadcastProcessFunction) after key_by."""
        stream, env = self.stream, self.stream.env
        keyed = stream.key_selector is not None
        if not isinstance(function, BroadcastProcessFunction):
            raise GraphError(f"process: give a BroadcastProcessFunction, not {function!r}")
        if isinstance(function, KeyedBroadcastProcessFunction) != keyed:
            wanted = "KeyedBroadcastProcessFunction" if keyed else "BroadcastProcessFunction"
            raise GraphError(
                f"process({name or ''}): the {'keyed' if keyed else 'non-keyed'} stream "
                f"connected with a broadcast stream takes a {wanted}, not "
                f"{type(function).__name__}"
            )
        factory = env.operator("broadcast_process")
        names = tuple(d.name for d in self.broadcast.descriptors)
        key = stream.key_selector
        stamps = (stream.timestamp_column, self.broadcast.stream.timestamp_column)
        return stream._then_two_input(
            self.broadcast.stream,
            "broadcast_process",
            name,
            lambda label: factory(
                function, names, key, stamps, name=label, output_schema=output_schema
            ),
            output_schema,
            second_partitioner=BROADCAST,
        )
