"""The message protocol between tasks on a Spark shuffle (ARCHITECTURE.md section 4).

Every message is one row: where it goes (``route`` = partition of the receiving stage,
``dest_vertex``, ``dest_subtask``), which channel it belongs to (``src_vertex``,
``src_subtask``, ``input_index``) and its place in it (``seq``), its ``kind``, a small
``value`` (watermark, checkpoint id) and a ``payload`` (Arrow IPC for data, JSON for
control events). Few large rows cross the JVM cheaply (SPARK_NOTES.md).
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.errors import ChannelError

ACK_VERTEX = -1
"""Destination of acknowledgements and reports: the driver, which collects the epoch's last
stage."""


class Kind(enum.IntEnum):
    """What a message carries."""

    DATA = 0
    WATERMARK = 1
    END_OF_INPUT = 2
    BARRIER = 3
    ACK = 4
    REPORT = 5
    WATERMARK_STATUS = 6


MESSAGE_SCHEMA = pa.schema(
    [
        ("route", pa.int32()),
        ("dest_vertex", pa.int32()),
        ("dest_subtask", pa.int32()),
        ("src_vertex", pa.int32()),
        ("src_subtask", pa.int32()),
        ("input_index", pa.int32()),
        ("seq", pa.int64()),
        ("kind", pa.int32()),
        ("value", pa.int64()),
        ("payload", pa.binary()),
    ]
)
MESSAGE_DDL = ", ".join(
    f"{f.name} {'int' if f.type == pa.int32() else 'bigint' if f.type == pa.int64() else 'binary'}"
    for f in MESSAGE_SCHEMA
)
"""The same schema in Spark's DDL, for ``mapInArrow``."""


def encode_batch(batch: pa.RecordBatch) -> bytes:
    """A batch as Arrow IPC stream bytes."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def decode_batch(payload: bytes) -> pa.RecordBatch:
    """Inverse of ``encode_batch``."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_next_batch()


def encode_json(document: Any) -> bytes:
    """A control payload as JSON bytes."""
    return json.dumps(document, sort_keys=True).encode()


def decode_json(payload: bytes) -> Any:
    """Inverse of ``encode_json``."""
    return json.loads(payload)


def check_for_driver(messages: pa.Table) -> None:
    """Refuse messages for a vertex among those the driver collected from an epoch's last
    stage: only acknowledgements and reports may reach it (anything else is a routing bug
    that would lose data silently)."""
    destinations = messages.column("dest_vertex")
    strays = pc.filter(destinations, pc.not_equal(destinations, ACK_VERTEX))
    if len(strays):
        raise ChannelError(
            f"the driver received {len(strays)} message(s) for vertex {strays[0].as_py()} "
            f"from the epoch's last stage: only acknowledgements and reports may reach it"
        )


class MessageBuffer:
    """Collects message rows column by column and turns them into one batch."""

    __slots__ = ("bytes", "columns")

    def __init__(self) -> None:
        self.columns: list[list[Any]] = [[] for _ in MESSAGE_SCHEMA]
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.columns[0])

    def add(self, row: tuple[Any, ...]) -> None:
        """Append one message (a tuple in MESSAGE_SCHEMA order)."""
        for column, value in zip(self.columns, row, strict=True):
            column.append(value)
        self.bytes += len(row[-1])

    def take(self) -> pa.RecordBatch:
        """The buffered messages as one batch; the buffer starts empty again."""
        batch = pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(self.columns, MESSAGE_SCHEMA, strict=True)],
            schema=MESSAGE_SCHEMA,
        )
        self.columns = [[] for _ in MESSAGE_SCHEMA]
        self.bytes = 0
        return batch
