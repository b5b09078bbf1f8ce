"""The baselines of bench/kafka.py: a plain confluent-kafka consume -> map -> produce loop
per input partition (one process each), at least once (flush at the end) or exactly once
(transactional consume-transform-produce, ``send_offsets_to_transaction`` and a commit
every ``commit_seconds``); and the latency probe, a process that sends stamped records at
a steady rate and measures their arrival on the output with a read_committed consumer.

Functions here run in spawned processes, so they import what they use."""

from __future__ import annotations

import time
from typing import Any

from flintlock.sinks.kafka_records import ROOM_WAIT_SECONDS

BATCH = 10_000
"""Records per ``consume`` call, as flintlock's source reads them (``batch_size``)."""


def transform(value: bytes) -> bytes:
    """The map both sides run: the value upper-cased (flintlock's is pyarrow's)."""
    return value.upper()


def producer_config(bootstrap: str, sink_defaults: bool) -> dict[str, Any]:
    """The baseline producer's settings: idempotent, with KafkaSink's defaults
    (``sink_defaults``) or librdkafka's (but KafkaSink's partitioner)."""
    from flintlock.sinks.kafka_records import PRODUCER_DEFAULTS

    defaults = PRODUCER_DEFAULTS if sink_defaults else {"partitioner": "murmur2_random"}
    return {"bootstrap.servers": bootstrap, "enable.idempotence": True, **defaults}


def plain_loop(
    bootstrap: str,
    source: str,
    partition: int,
    target: str,
    end: int | None,
    exactly_once: bool,
    commit_seconds: float,
    sink_defaults: bool,
    barrier: Any,
    stop: Any,
    results: Any,
) -> None:
    """Copy ``source[partition]`` from offset 0 to ``end`` (None: until ``stop`` is set)
    into ``target`` through ``transform``; put (started, ended, records) on ``results``.
    The clients are made after ``barrier``, so their start is inside the time."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    barrier.wait()
    started = time.time()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"plain-{target}-{partition}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(source, partition, 0)])
    config = producer_config(bootstrap, sink_defaults)
    if exactly_once:
        config["transactional.id"] = f"plain-{target}-{partition}"
    producer = Producer(config)
    if exactly_once:
        producer.init_transactions(60)
        producer.begin_transaction()
    position, records, last_commit = 0, 0, time.monotonic()
    while (position < end) if end is not None else not stop.is_set():
        for message in consumer.consume(BATCH, 0.05):
            if message.error() is not None:
                raise RuntimeError(f"plain loop reading {source}: {message.error()}")
            value = transform(message.value())
            while True:
                try:
                    producer.produce(target, value, message.key())
                    break
                except BufferError:  # as KafkaSink waits for room
                    producer.poll(ROOM_WAIT_SECONDS)
            position = message.offset() + 1
            records += 1
        producer.poll(0)
        if exactly_once and time.monotonic() - last_commit >= commit_seconds:
            _commit(producer, consumer, source, partition, position)
            producer.begin_transaction()
            last_commit = time.monotonic()
    if exactly_once:
        _commit(producer, consumer, source, partition, position)
    left = producer.flush(120)
    consumer.close()
    if left:
        raise RuntimeError(f"plain loop: {left} records not delivered")
    results.put((started, time.time(), records))


def _commit(producer: Any, consumer: Any, source: str, partition: int, position: int) -> None:
    from confluent_kafka import TopicPartition

    offsets = [TopicPartition(source, partition, position)]
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
    producer.commit_transaction(60)


def probe(
    bootstrap: str, source: str, target: str, rate: float, seconds: float, results: Any
) -> None:
    """Send ``rate`` records a second for ``seconds`` into ``source``, each value carrying
    its send time; read ``target`` read_committed and put each record's arrival minus
    send time (seconds) on ``results`` as one list, once every record arrived (or 60 s
    after the last was sent)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{target}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    partitions = consumer.list_topics(target, timeout=10).topics[target].partitions
    consumer.assign([TopicPartition(target, p, 0) for p in partitions])
    total = int(rate * seconds)
    latencies: list[float] = []
    started = time.time()
    sent = 0
    deadline = started + seconds + 60
    while len(latencies) < total and time.time() < deadline:
        due = min(total, int((time.time() - started) * rate) + 1)
        while sent < due:
            producer.produce(source, b'{"sent":%.6f,"pad":"abcdefghij"}' % time.time())
            sent += 1
        producer.poll(0)
        for message in consumer.consume(1000, 0.002):
            if message.error() is None:
                arrived = time.time()
                stamp = message.value().split(b":", 1)[1].split(b",", 1)[0]
                latencies.append(arrived - float(stamp))
    producer.flush(30)
    consumer.close()
    results.put(latencies)
