"""A task's input on Spark: turns received messages into events, checking each channel.

Messages for this subtask become events; acknowledgements and reports are forwarded
towards the driver, messages for a later stage are relayed. A message for another
subtask of this vertex, a sequence gap or a duplicate fails the task.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from flintlock.core.errors import ChannelError
from flintlock.core.events import (
    CheckpointBarrier,
    DataEvent,
    EndOfInputEvent,
    InputEvent,
    Watermark,
    WatermarkEvent,
    WatermarkStatusEvent,
)
from flintlock.core.exchange.messages import Kind, decode_batch, decode_json, payload_buffers
from flintlock.core.exchange.writer import MessageWriter
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.plan.graph import JobVertex


class MessageReader:
    """Reads the message batches of one Spark partition for one subtask."""

    def __init__(
        self,
        plan: ExecutionPlan,
        vertex: JobVertex,
        subtask: int,
        batches: Iterator[pa.RecordBatch],
        writer: MessageWriter,
    ) -> None:
        self.plan, self.vertex, self.subtask = plan, vertex, subtask
        self.batches = batches
        self.writer = writer
        self.records_in = 0
        self._expected: dict[tuple[int, int], int] = {}
        self._base = vertex.channel_base(plan.vertices)
        self._forward_inputs = {
            (i, upstream) for upstream, i, p in vertex.inputs if p.kind == "forward"
        }
        self._events = self._read()

    def events(self) -> Iterator[InputEvent]:
        """The events for this subtask, in channel order; forwards the rest as it goes.

        One iterator for the reader's life, so ``drain`` goes on exactly where the task
        stopped reading (mid-batch included)."""
        return self._events

    def _read(self) -> Iterator[InputEvent]:
        me = self.vertex.id
        for batch in self.batches:
            last = batch.num_columns - 1  # the payloads: buffers, not Python bytes
            columns = [batch.column(i).to_pylist() for i in range(last)]
            columns.append(payload_buffers(batch.column(last)))
            for row in zip(*columns, strict=True):
                dest_vertex = row[1]
                if dest_vertex != me:
                    self.writer.relay(row)
                    continue
                kind = row[7]
                if kind == Kind.ACK or kind == Kind.REPORT:
                    self.writer.send_towards_driver(Kind(kind), row[9])
                    continue
                yield self._event(row)

    def drain(self) -> None:
        """After the task ended: forward what is left; anything for the task is an error."""
        for event in self.events():
            raise ChannelError(
                f"{type(event).__name__} arrived for subtask {self.subtask} of "
                f"'{self.vertex.name}' after its epoch ended"
            )

    def _event(self, row: tuple) -> InputEvent:  # type: ignore[type-arg]
        _, _, dest_subtask, src_vertex, src_subtask, input_index, seq, kind, value, payload = row
        if dest_subtask != self.subtask:
            raise ChannelError(
                f"subtask {self.subtask} of '{self.vertex.name}' received a message for "
                f"subtask {dest_subtask} (from vertex {src_vertex} subtask {src_subtask})"
            )
        channel_id = (src_vertex, src_subtask)
        expected = self._expected.get(channel_id, 0)
        if seq != expected:
            what = "duplicate" if seq < expected else "gap"
            raise ChannelError(
                f"{what} on the channel from vertex {src_vertex} subtask {src_subtask} to "
                f"subtask {self.subtask} of '{self.vertex.name}': expected message {expected}, "
                f"got {seq}"
            )
        self._expected[channel_id] = expected + 1
        channel = self._base[(input_index, src_vertex)]
        if (input_index, src_vertex) not in self._forward_inputs:
            channel += src_subtask
        if kind == Kind.DATA:
            batch = decode_batch(payload)
            self.records_in += batch.num_rows
            return DataEvent(batch, input_index, channel)
        if kind == Kind.WATERMARK:
            return WatermarkEvent(Watermark(value), input_index, channel)
        if kind == Kind.WATERMARK_STATUS:
            return WatermarkStatusEvent(bool(value), input_index, channel)
        if kind == Kind.END_OF_INPUT:
            return EndOfInputEvent(input_index, channel)
        if kind == Kind.BARRIER:
            details = decode_json(payload)
            return CheckpointBarrier(value, details["kind"], details["final"], channel, input_index)
        raise ChannelError(f"unknown message kind {kind}")
