"""The kafka source on a worker: reads exactly ``[start, end)`` of its partitions with an
assigned consumer (no group, no rebalance) into Arrow batches, values deserialised.

Offsets of a read_committed consumer are not contiguous (transaction markers, aborted
records), so a partition is done once its position reaches ``end``, never after a count
of records."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flintlock import PluginError, SourceReader
from flintlock.plugins.kafka_offsets import confluent, parse_split, split_name

MIXED = "<several splits>"
"""The rows of a batch come from more than one partition."""
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def record_schema(value_type: pa.DataType) -> pa.Schema:
    """The columns of every batch the kafka source reads."""
    return pa.schema(
        [
            ("key", pa.binary()),
            ("value", value_type),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("ms", tz="UTC")),
            ("headers", HEADERS),
        ]
    )


class ValueDeserializer:
    """Turns a record's value bytes into the ``value`` column (the plugin point for Avro,
    Protobuf...): ``value_type`` is the column's Arrow type, ``deserialize`` one value's
    Python object of it. Null values stay null."""

    value_type: pa.DataType = pa.binary()

    def deserialize(self, data: bytes) -> Any:
        return data


class Utf8Values(ValueDeserializer):
    value_type = pa.string()

    def deserialize(self, data: bytes) -> Any:
        return data.decode("utf-8")


class JsonValues(ValueDeserializer):
    """A JSON object per record, into a struct of ``schema``'s fields."""

    def __init__(self, schema: pa.Schema) -> None:
        self.value_type = pa.struct(list(schema))

    def deserialize(self, data: bytes) -> Any:
        value = json.loads(data)
        pa.array([value], self.value_type)  # raises here, at its own record, if it does not fit
        return value


def value_deserializer(value_format: Any, schema: pa.Schema | None) -> ValueDeserializer:
    """The deserialiser ``value_format`` names (or is)."""
    if isinstance(value_format, ValueDeserializer):
        return value_format
    if value_format == "json":
        if not isinstance(schema, pa.Schema):
            raise PluginError("from_kafka: value_format='json' needs schema=pyarrow.Schema")
        return JsonValues(schema)
    known = {"bytes": ValueDeserializer, "utf-8": Utf8Values}
    if value_format not in known:
        raise PluginError(
            f"from_kafka: value_format {value_format!r} must be 'bytes', 'utf-8', 'json' "
            f"(with schema=) or a ValueDeserializer"
        )
    return known[value_format]()


class KafkaRangeReader(SourceReader):
    """Reads ``{split: (start, end)}``; ``positions`` are each split's next offset."""

    def __init__(
        self,
        config: dict[str, Any],
        ranges: dict[str, tuple[int, int]],
        deserializer: ValueDeserializer,
        batch_size: int,
        timeout_seconds: float,
    ) -> None:
        self.config = config
        self.ranges = ranges
        self.deserializer = deserializer
        self.schema = record_schema(deserializer.value_type)
        self.batch_size = batch_size
        self.timeout = timeout_seconds
        self._positions = {split: start for split, (start, _) in ranges.items()}
        self._consumer: Any = None
        self._splits: dict[tuple[str, int], str] = {}
        self._offsets: list[int] = []  # of the rows kept for the next batch
        self._batch_split: str | None = None  # their one split, or MIXED

    def positions(self) -> dict[str, int]:
        return dict(self._positions)

    def split_ids(self, batch: pa.RecordBatch) -> pa.Array:
        """``topic:partition`` of each row: watermarks are per partition, as Flink's."""
        topics, partitions = batch.column("topic"), batch.column("partition")
        return pc.binary_join_element_wise(topics, pc.cast(partitions, pa.string()), ":")

    def _open(self) -> Any:
        kafka = confluent()
        consumer = kafka.Consumer(
            {
                "isolation.level": "read_committed",
                "auto.offset.reset": "error",  # planned offsets gone (retention): say so
                **self.config,
                "group.id": self.config.get("group.id") or "flintlock-reader",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
            }
        )
        pending = {s: self._positions[s] for s, (_, end) in self.ranges.items()}
        consumer.assign([kafka.TopicPartition(*parse_split(s), o) for s, o in pending.items()])
        return consumer

    def read(self) -> Iterator[pa.RecordBatch]:
        open_splits = {s for s, (_, end) in self.ranges.items() if self._positions[s] < end}
        if not open_splits:
            return
        self._consumer = consumer = self._open()
        rows: list[Any] = []
        deadline = time.monotonic() + self.timeout
        while open_splits:
            messages = consumer.consume(self.batch_size - len(rows), 0.2)
            progressed = self._take(messages, rows, open_splits)
            progressed |= self._check_positions(open_splits)
            if progressed:
                deadline = time.monotonic() + self.timeout
            elif time.monotonic() > deadline:
                raise PluginError(
                    f"from_kafka: partitions {sorted(open_splits)} did not reach their planned "
                    f"end offsets within {self.timeout} s (at {self._where(open_splits)})"
                )
            if len(rows) >= self.batch_size or (rows and not open_splits):
                yield self._batch(rows)
                rows = []

    def _take(self, messages: list[Any], rows: list[Any], open_splits: set[str]) -> bool:
        """Keep the records below their split's end; close splits that reached it."""
        if len(self.ranges) == 1 and open_splits:
            taken = self._take_all_of_one_split(messages, rows, open_splits)
            if taken is not None:
                return taken
        return self._take_each(messages, rows, open_splits)

    def _take_all_of_one_split(
        self, messages: list[Any], rows: list[Any], open_splits: set[str]
    ) -> bool | None:
        """A reader of one partition (its consumer is assigned nothing else) whose records
        here are all below its end and none an error keeps them all, with two calls per
        record; else None (``_take_each`` decides record by record)."""
        if not messages or any([m.error() is not None for m in messages]):
            return None if messages else False
        offsets = [m.offset() for m in messages]
        (split,) = open_splits
        end, last = self.ranges[split][1], max(offsets)
        if last >= end:
            return None
        rows.extend(messages)
        self._offsets.extend(offsets)
        if self._batch_split is None:
            self._batch_split = split
        self._positions[split] = offsets[-1] + 1
        if last + 1 >= end:
            self._close(split, open_splits)
        return True

    def _take_each(self, messages: list[Any], rows: list[Any], open_splits: set[str]) -> bool:
        """``_take`` record by record (a split's name is made once per partition)."""
        progressed = False
        splits, ranges, positions = self._splits, self.ranges, self._positions
        offsets = self._offsets
        for message in messages:
            topic, partition = message.topic(), message.partition()
            split = splits.get((topic, partition))
            if split is None:
                split = splits[topic, partition] = split_name(topic, partition)
            if message.error() is not None:
                self._error(message, split, open_splits)
                continue
            if split not in open_splits:
                continue
            offset, end = message.offset(), ranges[split][1]
            if offset >= end:
                self._close(split, open_splits)
                continue
            rows.append(message)
            offsets.append(offset)
            if split is not self._batch_split:
                self._batch_split = split if len(rows) == 1 else MIXED
            progressed = True
            positions[split] = offset + 1
            if offset + 1 >= end:
                self._close(split, open_splits)
        return progressed

    def _error(self, message: Any, split: str, open_splits: set[str]) -> None:
        """A partition's end (it may close the split) or a read error (raised)."""
        error = message.error()
        if error.code() != confluent().KafkaError._PARTITION_EOF:
            raise PluginError(
                f"from_kafka: reading topic '{message.topic()}' partition "
                f"{message.partition()} from offset {self._positions.get(split)}: "
                f"{error.str()}"
            )
        if message.offset() >= self.ranges[split][1]:
            self._close(split, open_splits)

    def _check_positions(self, open_splits: set[str]) -> bool:
        """Close splits whose consumer position passed their end (markers, aborts)."""
        if not open_splits:
            return False
        kafka = confluent()
        asked = [kafka.TopicPartition(*parse_split(s)) for s in sorted(open_splits)]
        closed = False
        for tp in self._consumer.position(asked):
            split = split_name(tp.topic, tp.partition)
            if tp.offset >= self.ranges[split][1]:
                self._close(split, open_splits)
                closed = True
        return closed

    def _close(self, split: str, open_splits: set[str]) -> None:
        if split in open_splits:
            open_splits.discard(split)
            self._positions[split] = self.ranges[split][1]
            self._consumer.pause([confluent().TopicPartition(*parse_split(split))])

    def _where(self, splits: set[str]) -> str:
        return ", ".join(f"{s} offset {self._positions[s]}" for s in sorted(splits))

    def _batch(self, messages: list[Any]) -> pa.RecordBatch:
        """The Arrow batch of ``messages``, a column at a time; a value that does not
        deserialise names its record. Columns the batch shares (one topic, one partition,
        no headers) are built without a list of per-record values."""
        count = len(messages)
        offsets, self._offsets = self._offsets, []
        split, self._batch_split = self._batch_split, None
        one_partition = split is not MIXED
        topic, partition = messages[0].topic(), messages[0].partition()
        stamps = [m.timestamp() for m in messages]
        headers = [m.headers() for m in messages]
        columns = [
            pa.array([m.key() for m in messages], pa.binary()),
            self._values(messages),
            pa.repeat(pa.scalar(topic, pa.string()), count)
            if one_partition
            else pa.array([m.topic() for m in messages], pa.string()),
            pa.repeat(pa.scalar(partition, pa.int32()), count)
            if one_partition
            else pa.array([m.partition() for m in messages], pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array([ms if kind else None for kind, ms in stamps], pa.timestamp("ms", tz="UTC")),
            pa.array([_headers(h) for h in headers], HEADERS)
            if any(headers)
            else pa.ListArray.from_arrays(
                pa.repeat(pa.scalar(0, pa.int32()), count + 1), pa.array([], HEADERS.value_type)
            ),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _values(self, messages: list[Any]) -> pa.Array:
        """The ``value`` column: bytes as they are (no call per record), else deserialised."""
        if type(self.deserializer) is ValueDeserializer:
            return pa.array([m.value() for m in messages], pa.binary())
        values = []
        for message in messages:
            data = message.value()
            try:
                values.append(None if data is None else self.deserializer.deserialize(data))
            except Exception as error:
                raise PluginError(
                    f"from_kafka: the value of topic '{message.topic()}' partition "
                    f"{message.partition()} offset {message.offset()} does not deserialise "
                    f"({type(self.deserializer).__name__}): {error}"
                ) from error
        return pa.array(values, self.deserializer.value_type)

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()


def _headers(headers: list[tuple[str, bytes | None]] | None) -> list[dict[str, Any]]:
    return [{"key": key, "value": value} for key, value in headers or []]
