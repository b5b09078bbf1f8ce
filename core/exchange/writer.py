"""A task's output on Spark: frames batches and control events as messages per channel.

Flink's RecordWriter, over a Spark shuffle: each channel's messages carry their own
sequence numbers so the receiver can refuse a gap or a duplicate, and data is gathered
into large messages before it is framed, because few large rows cross the JVM cheaply
(``COALESCE_ROWS``; ``messages.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pyarrow as pa

from flintlock.core.checkpoint.snapshots import TaskAcknowledgement
from flintlock.core.events import Watermark
from flintlock.core.exchange.messages import Kind, MessageBuffer, encode_json
from flintlock.core.exchange.partitioners import BatchSplitter
from flintlock.core.exchange.reports import PhaseReport
from flintlock.core.plan.execution import ExecutionPlan, channel_key
from flintlock.core.plan.graph import JobVertex, OutputEdge
from flintlock.core.task_info import TaskInfo

FLUSH_BYTES = 4 << 20
MAX_PAYLOAD_BYTES = 8 << 20
COALESCE_ROWS = 65536
"""Data batches are gathered up to this many rows (or COALESCE_BYTES) before they are
split and framed: Spark hands a source 10,000-row batches; larger messages cost less per
row to route, frame and read, and keyed batch functions see each key fewer times."""
COALESCE_BYTES = 4 << 20


class MessageWriter:
    """Implements RecordWriter for one subtask of a stage; hands full buffers to ``flush``."""

    def __init__(self, plan: ExecutionPlan, vertex: JobVertex, subtask: int) -> None:
        self.plan, self.vertex, self.subtask = plan, vertex, subtask
        self.stage = vertex.layer
        self.buffer = MessageBuffer()
        self.flush: Callable[[pa.RecordBatch], None] | None = None
        self.records_out = 0
        self._seq: dict[tuple[int, int], int] = {}
        every = [
            (
                edge,
                BatchSplitter(
                    edge.partitioner,
                    subtask,
                    plan.vertices[edge.target].parallelism,
                    plan.max_parallelism,
                ),
            )
            for edge in vertex.outputs
        ]
        self._edges = [(edge, splitter) for edge, splitter in every if edge.side is None]
        self._side_edges: dict[tuple[str, str], list[tuple[OutputEdge, BatchSplitter]]] = {}
        for edge, splitter in every:
            if edge.side is not None:
                self._side_edges.setdefault(edge.side, []).append((edge, splitter))
        self._all_edges = every  # watermarks, end of input and barriers go on every edge
        self._gather = all(edge.partitioner.kind != "rebalance" for edge, _ in self._edges)
        """A rebalance sends each batch to the next subtask: gathering would send small
        inputs to one subtask only."""
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    # ---- RecordWriter ----

    def emit_batch(self, batch: pa.RecordBatch) -> None:
        """Split by target subtask; one DATA message (Arrow IPC) per target and part.

        Batches are gathered (COALESCE_ROWS) and framed together before anything else
        is sent, so every channel keeps its order."""
        self.records_out += batch.num_rows
        if not self._edges:
            return
        if not self._gather:
            self._emit_on(self._edges, batch)
            return
        if self._pending and not self._pending[0].schema.equals(batch.schema):
            self.frame_pending()
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= COALESCE_ROWS or self._pending_bytes >= COALESCE_BYTES:
            self.frame_pending()

    def frame_pending(self) -> None:
        """Split and frame the gathered data batches (before any other message)."""
        pending = self._pending
        if not pending:
            return
        batch = pending[0] if len(pending) == 1 else pa.concat_batches(pending)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        self._emit_on(self._edges, batch)

    def emit_side(self, operator: str, tag: str, batch: pa.RecordBatch) -> None:
        """A side output's batch, on the edges that read it (dropped if none does)."""
        edges = self._side_edges.get((operator, tag))
        if edges:
            self.frame_pending()
            self._emit_on(edges, batch)

    def _emit_on(
        self, edges: list[tuple[OutputEdge, BatchSplitter]], batch: pa.RecordBatch
    ) -> None:
        for edge, splitter in edges:
            for target, part in splitter.split(batch):
                for piece in _pieces(part):
                    header = self._header(edge.target, target, edge.input_index, Kind.DATA, 0)
                    self.buffer.add_batch(header, piece)
        self._maybe_flush()

    def emit_watermark(self, watermark: Watermark) -> None:
        """A WATERMARK to every subtask each edge can reach."""
        self._to_all(Kind.WATERMARK, watermark.timestamp, b"")

    def emit_watermark_status(self, idle: bool) -> None:
        """A WATERMARK_STATUS (1 idle, 0 active) to every subtask each edge can reach."""
        self._to_all(Kind.WATERMARK_STATUS, int(idle), b"")

    def end_of_input(self) -> None:
        """END_OF_INPUT on every channel: this subtask's output ended for good."""
        self._to_all(Kind.END_OF_INPUT, 0, b"")

    def acknowledge(self, acknowledgement: TaskAcknowledgement) -> None:
        """The barrier on every channel, then the acknowledgement towards the driver."""
        barrier = self.plan.barrier
        payload = encode_json({"kind": barrier.kind, "final": barrier.final})
        self._to_all(Kind.BARRIER, barrier.checkpoint_id, payload)
        document = replace(acknowledgement, vertex=self.vertex.id).to_json()
        self.send_towards_driver(Kind.ACK, encode_json(document))

    def report_phases(self, task: TaskInfo, phases: dict[str, list[float]]) -> None:
        """The subtask's phase times, after close, in a REPORT the driver joins to its
        acknowledgement (by task, subtask and attempt)."""
        report = PhaseReport(task.task_name, task.subtask_index, task.attempt_id, phases)
        self.send_towards_driver(Kind.REPORT, encode_json(report.to_json()))

    # ---- forwarding ----

    def send_towards_driver(self, kind: Kind, payload: bytes) -> None:
        """An ACK or REPORT, one hop towards the driver (it collects the last stage)."""
        self.frame_pending()
        dest_vertex, dest_subtask = self.plan.ack_hop(self.vertex.id, self.subtask)
        key = channel_key(self.vertex.id, self.subtask, dest_vertex, dest_subtask)
        route = self.plan.route(self.stage, dest_vertex, dest_subtask, key)
        self.buffer.add(
            (
                route,
                dest_vertex,
                dest_subtask,
                self.vertex.id,
                self.subtask,
                0,
                -1,
                int(kind),
                0,
                payload,
            )
        )
        self._maybe_flush()

    def relay(self, row: tuple[Any, ...]) -> None:
        """Pass on a message for a later stage, on the same path as the rest of its channel."""
        _, dest_vertex, dest_subtask, src_vertex, src_subtask = row[:5]
        self.frame_pending()
        key = channel_key(src_vertex, src_subtask, dest_vertex, dest_subtask)
        self.buffer.add((self.plan.route(self.stage, dest_vertex, dest_subtask, key), *row[1:]))
        self._maybe_flush()

    # ---- internals ----

    def _to_all(self, kind: Kind, value: int, payload: bytes) -> None:
        self.frame_pending()
        for edge, splitter in self._all_edges:
            for target in splitter.targets():
                self._send(edge.target, target, edge.input_index, kind, value, payload)
        self._maybe_flush()

    def _send(
        self,
        dest_vertex: int,
        dest_subtask: int,
        input_index: int,
        kind: Kind,
        value: int,
        payload: bytes,
    ) -> None:
        self.buffer.add(
            (*self._header(dest_vertex, dest_subtask, input_index, kind, value), payload)
        )

    def _header(
        self, dest_vertex: int, dest_subtask: int, input_index: int, kind: Kind, value: int
    ) -> tuple[int, ...]:
        """Every field of the channel's next message but its payload (takes its seq)."""
        channel = (dest_vertex, dest_subtask)
        seq = self._seq.get(channel, 0)
        self._seq[channel] = seq + 1
        key = channel_key(self.vertex.id, self.subtask, dest_vertex, dest_subtask)
        return (
            self.plan.route(self.stage, dest_vertex, dest_subtask, key),
            dest_vertex,
            dest_subtask,
            self.vertex.id,
            self.subtask,
            input_index,
            seq,
            int(kind),
            value,
        )

    def _maybe_flush(self) -> None:
        if self.buffer.bytes >= FLUSH_BYTES and self.flush is not None:
            self.flush(self.buffer.take())


def _pieces(batch: pa.RecordBatch) -> list[pa.RecordBatch]:
    """Split a batch whose IPC form would exceed MAX_PAYLOAD_BYTES (SPARK_NOTES.md)."""
    size = batch.nbytes
    if size <= MAX_PAYLOAD_BYTES or batch.num_rows <= 1:
        return [batch]
    parts = -(-size // MAX_PAYLOAD_BYTES)
    step = -(-batch.num_rows // parts)
    return [batch.slice(i, step) for i in range(0, batch.num_rows, step)]
