"""The message protocol between tasks on a Spark shuffle (ARCHITECTURE.md section 4).

Every message is one row: where it goes (``route`` = partition of the receiving stage,
``dest_vertex``, ``dest_subtask``), which channel it belongs to (``src_vertex``,
``src_subtask``, ``input_index``) and its place in it (``seq``), its ``kind``, a small
``value`` (watermark, checkpoint id) and a ``payload`` (Arrow IPC for data, JSON for
control events). Few large rows cross the JVM cheaply (SPARK_NOTES.md).
"""

from __future__ import annotations

import enum
import itertools
import json
from typing import Any

import numpy as np
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
    data: bytes = write_batch(pa.BufferOutputStream(), batch).getvalue().to_pybytes()
    return data


COMPRESS_FROM_BYTES = 64 * 1024
"""DATA payloads of at least this many bytes travel LZ4-compressed (Arrow IPC's own
buffer compression, undone by any IPC reader): the source stage's output crosses from
Python to the JVM and into Spark's shuffle, and less of it makes that stage cheaper
(bench/RESULTS.md, "Issue 23 and W4 on a quiet machine"). Smaller ones (a few rows of a
low-latency epoch) go as they are."""

_COMPRESSED = pa.ipc.IpcWriteOptions(compression="lz4")


def write_batch(sink: pa.NativeFile, batch: pa.RecordBatch) -> pa.NativeFile:
    """Append ``batch`` to ``sink`` as one Arrow IPC stream (schema, batch, end),
    compressed from ``COMPRESS_FROM_BYTES``."""
    options = _COMPRESSED if batch.nbytes >= COMPRESS_FROM_BYTES else None
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    return sink


def decode_batch(payload: bytes | pa.Buffer) -> pa.RecordBatch:
    """Inverse of ``encode_batch``; an 8-byte aligned ``pa.Buffer`` is read in place."""
    if isinstance(payload, pa.Buffer) and payload.address % 8 == 0:
        buffer = payload
    else:
        buffer = pa.py_buffer(bytes(payload))
    return pa.ipc.open_stream(buffer).read_next_batch()


def encode_json(document: Any) -> bytes:
    """A control payload as JSON bytes."""
    return json.dumps(document, sort_keys=True).encode()


def decode_json(payload: bytes | pa.Buffer) -> Any:
    """Inverse of ``encode_json``."""
    return json.loads(payload.to_pybytes() if isinstance(payload, pa.Buffer) else payload)


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
    """Collects message rows column by column and turns them into one batch.

    Payloads are written into one growing buffer as they come (a DATA payload's IPC
    stream straight from the batch, ``add_batch``), and the payload column is built from
    that buffer and the offsets: one copy of the data, however many messages."""

    __slots__ = ("_payloads", "_sizes", "columns")

    def __init__(self) -> None:
        self.columns: list[list[int]] = [[] for _ in range(len(MESSAGE_SCHEMA) - 1)]
        self._sizes: list[int] = []
        self._payloads = pa.BufferOutputStream()

    def __len__(self) -> int:
        return len(self._sizes)

    @property
    def bytes(self) -> int:
        """Payload bytes buffered."""
        return int(self._payloads.tell())

    def add(self, row: tuple[Any, ...]) -> None:
        """Append one message (a tuple in MESSAGE_SCHEMA order; the payload bytes or a
        ``pa.Buffer``)."""
        for column, value in zip(self.columns, row, strict=False):
            column.append(value)
        payload = row[-1]
        self._payloads.write(payload)
        size = len(payload)
        if size % 8:  # JSON: spaces keep every later payload 8-byte aligned (IPC reads it
            padding = 8 - size % 8  # in place); JSON ignores them
            self._payloads.write(b" " * padding)
            size += padding
        self._sizes.append(size)

    def add_batch(self, header: tuple[int, ...], batch: pa.RecordBatch) -> None:
        """Append a DATA message: ``header`` (every field but the payload), ``batch`` as
        its Arrow IPC payload, written in place."""
        for column, value in zip(self.columns, header, strict=True):
            column.append(value)
        start = self._payloads.tell()
        write_batch(self._payloads, batch)
        self._sizes.append(self._payloads.tell() - start)

    def take(self) -> pa.RecordBatch:
        """The buffered messages as one batch; the buffer starts empty again."""
        offsets = np.zeros(len(self._sizes) + 1, dtype=np.int32)
        np.cumsum(self._sizes, out=offsets[1:])
        payloads = pa.Array.from_buffers(
            pa.binary(),
            len(self._sizes),
            [None, pa.py_buffer(offsets), self._payloads.getvalue()],
        )
        arrays = [pa.array(c, f.type) for c, f in zip(self.columns, MESSAGE_SCHEMA, strict=False)]
        batch = pa.RecordBatch.from_arrays([*arrays, payloads], schema=MESSAGE_SCHEMA)
        self.columns = [[] for _ in range(len(MESSAGE_SCHEMA) - 1)]
        self._sizes = []
        self._payloads = pa.BufferOutputStream()
        return batch


def payload_buffers(column: pa.Array) -> list[pa.Buffer]:
    """The values of a binary column as zero-copy buffers (no Python bytes per message)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[
        column.offset : column.offset + len(column) + 1
    ].tolist()
    data = column.buffers()[2]
    if data is None:
        return [pa.py_buffer(b"")] * len(column)
    return [data.slice(a, b - a) for a, b in itertools.pairwise(offsets)]
