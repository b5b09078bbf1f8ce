"""How streams combine and spread: ``union``, ``connect`` (two inputs, or a broadcast
stream), ``broadcast`` and ``rebalance``, each typed by what it returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast, overload

import pyarrow as pa

from flintlock.core.datastream.building import BuildingStream, Feed
from flintlock.core.errors import GraphError
from flintlock.core.exchange.partitioners import BROADCAST, REBALANCE

if TYPE_CHECKING:
    from flintlock.core.datastream.broadcast import BroadcastConnectedStream, BroadcastStream
    from flintlock.core.datastream.connected import ConnectedStreams, MultipleConnectedStreams
    from flintlock.core.datastream.datastream import DataStream
    from flintlock.core.state.descriptors import StateDescriptor


class CombiningMethods(BuildingStream):
    """The DataStream methods that combine streams or say how records spread."""

    def union(self, *others: DataStream) -> DataStream:
        """Records of all streams, into the next operator's one input; the schema stays
        known if every stream has the same one."""
        feed = list(self.feed)
        schema = self.schema
        for other in others:
            feed += other.feed
            if schema is not None and not (other.schema is not None and other.schema == schema):
                schema = None
        return self._stream(feed, schema)

    @overload
    def connect(self, other: BroadcastStream) -> BroadcastConnectedStream: ...
    @overload
    def connect(self, other: DataStream) -> ConnectedStreams: ...
    def connect(
        self, other: DataStream | BroadcastStream
    ) -> ConnectedStreams | BroadcastConnectedStream:
        """Two streams into one two-input operator (CoProcessFunction), or this stream with
        a BroadcastStream (a BroadcastProcessFunction)."""
        from flintlock.core.datastream.broadcast import BroadcastConnectedStream, BroadcastStream
        from flintlock.core.datastream.connected import ConnectedStreams

        if isinstance(other, BroadcastStream):
            return BroadcastConnectedStream(self._as_stream(), other)
        return ConnectedStreams(self._as_stream(), other)

    def connect_many(self, *others: DataStream) -> MultipleConnectedStreams:
        """This stream and ``others`` into one multiple-input operator, inputs 1..N in
        order: ``.transform(name, factory)`` with a MultipleInputStreamOperator."""
        from flintlock.core.datastream.connected import MultipleConnectedStreams

        if not others:
            raise GraphError("connect_many needs at least one other stream")
        return MultipleConnectedStreams([self._as_stream(), *others])

    def rebalance(self) -> DataStream:
        """Spread batches round robin over the next operator's subtasks."""
        return self._stream([(t, REBALANCE, side) for t, _, side in self.feed], self.schema)

    @overload
    def broadcast(self) -> DataStream: ...
    @overload
    def broadcast(
        self, descriptor: StateDescriptor[Any], /, *more: StateDescriptor[Any]
    ) -> BroadcastStream: ...
    def broadcast(self, *descriptors: StateDescriptor[Any]) -> DataStream | BroadcastStream:
        """Send every batch to every subtask of the next operator. With state descriptors
        (MapStateDescriptor), a BroadcastStream for the broadcast state pattern:
        ``other.connect(stream.broadcast(rules)).process(BroadcastProcessFunction)``."""
        if descriptors:
            from flintlock.core.datastream.broadcast import BroadcastStream

            return BroadcastStream(self._as_stream(), descriptors)
        return self._stream([(t, BROADCAST, side) for t, _, side in self.feed], self.schema)

    def _stream(self, feed: Feed, schema: pa.Schema | None) -> DataStream:
        """A stream of ``feed`` in this stream's environment, with its event-time column."""
        from flintlock.core.datastream.datastream import DataStream

        return DataStream(self.env, feed, timestamp_column=self.timestamp_column, schema=schema)

    def _as_stream(self) -> DataStream:
        """This stream as the DataStream it is (the mixin's self)."""
        return cast("DataStream", self)
