"""How KafkaSink turns rows into Kafka records (topic, partition, key, value, headers),
and a producer wrapper that counts deliveries, so a lost record is an error, not silence.

Shared by the at-least-once writer (in tasks) and the exactly-once committer (on the
driver), so both write the same records for the same rows."""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flintlock import SinkOutputError

JSON_ROW = "json"
"""``value="json"``: the value is the whole row as a JSON object."""


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

    def records(self, batch: pa.RecordBatch, who: str) -> Iterator[dict[str, Any]]:
        """``Producer.produce`` keyword arguments for each row of ``batch``, in order."""
        self.check_schema(batch.schema, who)
        rows = batch.to_pylist()
        for row in rows:
            record: dict[str, Any] = {
                "topic": row[self.topic_column] if self.topic_column else self.topic,
                "value": (
                    to_bytes(row)
                    if self.value == JSON_ROW
                    else (to_bytes(row[self.value]) if self.value is not None else None)
                ),
            }
            if record["topic"] is None:
                raise SinkOutputError(f"{who}: a row's topic column '{self.topic_column}' is null")
            if self.key is not None:
                record["key"] = to_bytes(row[self.key])
            if self.partition is not None and row[self.partition] is not None:
                record["partition"] = int(row[self.partition])
            if self.headers:
                record["headers"] = [
                    (name, to_bytes(row[column])) for name, column in self.headers.items()
                ]
            yield record


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

    def produce(self, record: dict[str, Any]) -> None:
        """Queue one record (waiting for room in the queue when it is full)."""
        while True:
            try:
                self.producer.produce(**record, on_delivery=self._delivered)
                break
            except BufferError:
                self.producer.poll(0.1)
            except Exception as error:  # KafkaException: unknown topic or partition...
                raise SinkOutputError(
                    f"{self.who}: producing to {record['topic']}: {error}"
                ) from error
        self.produced += 1
        self.producer.poll(0)

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
