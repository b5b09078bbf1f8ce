"""How KafkaSink turns rows into Kafka records (topic, partition, key, value, headers),
and a producer wrapper that counts deliveries, so a lost record is an error, not silence.

Shared by the at-least-once writer (in tasks) and the exactly-once committer (on the
driver), so both write the same records for the same rows."""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flintlock import SinkOutputError

JSON_ROW = "json"
"""``value="json"``: the value is the whole row as a JSON object."""


PRODUCER_DEFAULTS: dict[str, Any] = {
    "partitioner": "murmur2_random",
    "delivery.report.only.error": True,
}
"""KafkaSink's producers unless ``producer_config`` says otherwise: murmur2 by key as Java
clients; a delivery report only for a record that failed (no Python call per delivered
record: ``flush`` says when every record is delivered)."""
ROOM_WAIT_SECONDS = 0.01
"""How long a produce waits for the producer's queue to make room, per try."""


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def to_bytes(value: Any) -> bytes | None:
    """A column's value as record bytes: bytes as they are, str as UTF-8, None as null,
    anything else as JSON."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, default=_json_default, separators=(",", ":")).encode()


@dataclass(frozen=True)
class RecordLayout:
    """Which columns make a record: ``key`` / ``value`` columns (``value="json"``: the
    whole row), ``headers`` (header name -> column), a ``partition`` column (else the
    partitioner picks), a ``topic_column`` (else ``topic``)."""

    topic: str | None
    key: str | None = None
    value: str | None = JSON_ROW
    headers: Mapping[str, str] = field(default_factory=dict)
    partition: str | None = None
    topic_column: str | None = None

    def columns(self) -> list[str]:
        """Every column the layout names (``value="json"`` names none)."""
        named = [self.key, self.partition, self.topic_column, *self.headers.values()]
        if self.value != JSON_ROW:
            named.append(self.value)
        return [column for column in named if column is not None]

    def check_schema(self, schema: pa.Schema, who: str) -> None:
        """Refuse a stream that lacks a column the layout names, or whose partition or
        topic column has the wrong type."""
        missing = [column for column in self.columns() if column not in schema.names]
        if missing:
            raise SinkOutputError(
                f"{who}: the stream has no column {missing} (its columns: {schema.names})"
            )
        if self.partition is not None and not pa.types.is_integer(
            schema.field(self.partition).type
        ):
            raise SinkOutputError(f"{who}: the partition column '{self.partition}' is not integer")
        if self.topic_column is not None and not pa.types.is_string(
            schema.field(self.topic_column).type
        ):
            raise SinkOutputError(f"{who}: the topic column '{self.topic_column}' is not a string")

    def produce_arguments(self, batch: pa.RecordBatch, who: str) -> RecordColumns:
        """The ``Producer.produce`` arguments of ``batch``'s rows, a column at a time."""
        self.check_schema(batch.schema, who)
        if self.value == JSON_ROW:
            values: list[bytes | None] | None = [to_bytes(row) for row in batch.to_pylist()]
        else:
            values = None if self.value is None else byte_values(batch.column(self.value))
        topics = None
        if self.topic_column is not None:
            column = batch.column(self.topic_column)
            if column.null_count:
                raise SinkOutputError(f"{who}: a row's topic column '{self.topic_column}' is null")
            topics = column.to_pylist()
        partitions = None
        if self.partition is not None:
            partitions = pc.fill_null(batch.column(self.partition), -1).to_pylist()
        headers = None
        if self.headers:
            named = [(n, byte_values(batch.column(c))) for n, c in self.headers.items()]
            headers = [[(n, v[row]) for n, v in named] for row in range(batch.num_rows)]
        return RecordColumns(
            batch.num_rows,
            self.topic,
            topics,
            values,
            None if self.key is None else byte_values(batch.column(self.key)),
            partitions,
            headers,
        )


@dataclass(frozen=True)
class RecordColumns:
    """A batch's records as columns of ``produce`` arguments; None: the same for every
    record (``topic``; no value, no key, the partitioner's partition, no headers)."""

    rows: int
    topic: str | None
    topics: list[str] | None
    values: list[bytes | None] | None
    keys: list[bytes | None] | None
    partitions: list[int] | None
    headers: list[list[tuple[str, bytes | None]]] | None


def byte_values(column: pa.Array) -> list[bytes | None]:
    """A column's values as record bytes (``to_bytes``): binary columns as they are,
    strings as their UTF-8 bytes, both without a Python call per value."""
    kind = column.type
    values: list[bytes | None]
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        values = column.to_pylist()
    elif pa.types.is_string(kind):
        values = column.cast(pa.binary()).to_pylist()
    elif pa.types.is_large_string(kind):
        values = column.cast(pa.large_binary()).to_pylist()
    else:
        values = [to_bytes(value) for value in column.to_pylist()]
    return values


class DeliveryCounter:
    """Produces through a confluent-kafka ``Producer`` and remembers the first delivery
    error, so ``flush`` can say whether every record reached the broker."""

    def __init__(self, producer: Any, who: str) -> None:
        self.producer = producer
        self.who = who
        self.produced = 0
        self.failed: list[str] = []

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failed.append(f"{message.topic()}[{message.partition()}]: {error}")

    def produce_batch(self, records: RecordColumns) -> None:
        """Queue a batch's records, in order (waiting for room when the queue is full);
        one ``produce`` call per record and one ``poll`` per batch."""
        rows = records.rows
        topics = records.topics if records.topics is not None else repeat(records.topic, rows)
        values = records.values if records.values is not None else repeat(None, rows)
        keys = records.keys if records.keys is not None else repeat(None, rows)
        partitions = records.partitions if records.partitions is not None else repeat(-1, rows)
        headers = records.headers if records.headers is not None else repeat(None, rows)
        produce, delivered = self.producer.produce, self._delivered
        for topic, value, key, partition, header in zip(
            topics, values, keys, partitions, headers, strict=True
        ):
            try:
                if header is None:
                    produce(topic, value, key, partition, delivered)
                else:
                    produce(topic, value, key, partition, delivered, headers=header)
            except BufferError:
                self._produce_when_room(topic, value, key, partition, header)
            except Exception as error:  # KafkaException: unknown topic or partition...
                raise SinkOutputError(f"{self.who}: producing to {topic}: {error}") from error
        self.produced += rows
        self.producer.poll(0)

    def _produce_when_room(
        self, topic: str | None, value: bytes | None, key: bytes | None, partition: int, header: Any
    ) -> None:
        while True:
            self.producer.poll(ROOM_WAIT_SECONDS)
            try:
                self.producer.produce(
                    topic, value, key, partition, self._delivered, headers=header or None
                )
                return
            except BufferError:
                continue
            except Exception as error:
                raise SinkOutputError(f"{self.who}: producing to {topic}: {error}") from error

    def flush(self, timeout: float) -> None:
        """Until every queued record is delivered; a failed or undelivered one is an error."""
        left = self.producer.flush(timeout)
        if left:
            raise SinkOutputError(
                f"{self.who}: {left} records not delivered after {timeout:.0f} s "
                f"(broker unreachable?)"
            )
        if self.failed:
            raise SinkOutputError(
                f"{self.who}: {len(self.failed)} records failed, first: {self.failed[0]}"
            )
