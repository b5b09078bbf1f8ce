"""Records the kafka source tests produce, and what the source must read of them: each
produced record as the row ``from_kafka`` gives (a plain-Python reference)."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterable
from typing import Any

from kafka_server import KafkaBroker

BASE_MS = 1_700_000_000_000


def order(i: int) -> dict[str, Any]:
    return {"id": i, "amount": i % 7, "customer": f"c{i % 3}"}


def produce_orders(
    kafka: KafkaBroker,
    topic: str,
    ids: Iterable[int],
    partitions: int,
    transactional_id: str | None = None,
    abort: bool = False,
) -> list[dict[str, Any]]:
    """Orders ``ids`` as JSON values (order i to partition i mod ``partitions``, key
    ``k<i>``, timestamp BASE_MS + i s, one header); in one transaction if
    ``transactional_id`` (aborted if ``abort``). The rows a reader must see, with the
    offsets the broker gave them ([] for an aborted transaction)."""
    from confluent_kafka import Producer

    config = kafka.config(linger_ms=5)
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    producer = Producer(config)
    delivered: list[Any] = []
    if transactional_id is not None:
        producer.init_transactions(30)
        producer.begin_transaction()
    for i in ids:
        producer.produce(
            topic,
            value=json.dumps(order(i)).encode(),
            key=f"k{i}".encode(),
            partition=i % partitions,
            timestamp=BASE_MS + i * 1000,
            headers=[("source", f"test-{i}".encode())],
            on_delivery=lambda error, message: delivered.append((error, message)),
        )
    producer.flush(30)  # delivered (an aborted transaction's records too: then aborted)
    if transactional_id is not None:
        (producer.abort_transaction if abort else producer.commit_transaction)(30)
    assert [error for error, _ in delivered if error is not None] == []
    if abort:
        return []
    return [as_row(message) for _, message in delivered]


def as_row(message: Any) -> dict[str, Any]:
    """The row ``from_kafka(value_format="bytes")`` reads for a produced record (its
    headers as produced: a delivery report does not carry them)."""
    _, millis = message.timestamp()
    return {
        "key": message.key(),
        "value": message.value(),
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC),
        "headers": [{"key": "source", "value": b"test-" + message.key()[1:]}],
    }


def in_place(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` in (topic, partition, offset) order."""
    return sorted(rows, key=lambda row: (row["topic"], row["partition"], row["offset"]))


def add_partition(kafka: KafkaBroker, topic: str, count: int) -> None:
    """Grow ``topic`` to ``count`` partitions and wait until each has a leader."""
    from confluent_kafka.admin import NewPartitions

    admin = kafka.admin()
    admin.create_partitions([NewPartitions(topic, count)])[topic].result(30)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < count:
        assert time.monotonic() < deadline
        time.sleep(0.05)
