"""The test broker (tests/kafka_server.py) is a real Kafka: it makes partitioned topics,
its transactions hide aborted records from ``read_committed`` consumers only (the
exactly-once sink relies on that), and it keeps its data across a restart or a crash."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Producer
from kafka_server import KafkaBroker, start_broker


def new_topic(kafka: KafkaBroker, partitions: int) -> str:
    return kafka.create_topic(f"t-{uuid.uuid4().hex[:10]}", partitions)


def values(records: list[Any]) -> list[tuple[int, bytes]]:
    return [(record.partition(), record.value()) for record in records]


def send(producer: Producer, topic: str, batch: list[tuple[int, bytes]]) -> None:
    for partition, value in batch:
        producer.produce(topic, value, key=value, partition=partition)
    producer.flush(30)  # on the broker, in its log, before a commit or an abort


def test_the_broker_answers_and_makes_a_topic_of_three_partitions(kafka: KafkaBroker) -> None:
    metadata = kafka.admin().list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", kafka.port)]
    topic = new_topic(kafka, partitions=3)
    described = kafka.admin().list_topics(topic, timeout=10).topics[topic]
    assert sorted(described.partitions) == [0, 1, 2]
    assert {p.leader for p in described.partitions.values()} == {1}  # the one node leads


def test_read_committed_sees_the_committed_batches_and_read_uncommitted_all(
    kafka: KafkaBroker,
) -> None:
    topic = new_topic(kafka, partitions=3)
    committed = [(n % 3, f"committed-{n}".encode()) for n in range(6)]
    aborted = [(n % 3, f"aborted-{n}".encode()) for n in range(3)]
    last = [(0, b"committed-last")]
    producer = Producer(kafka.config(transactional_id=f"tx-{topic}"))
    producer.init_transactions(30)
    for batch, commit in ((committed, True), (aborted, False), (last, True)):
        producer.begin_transaction()
        send(producer, topic, batch)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    del producer

    def in_log_order(*batches: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """Per partition, in the order sent: what a reader of the topic gets back."""
        return sorted((row for batch in batches for row in batch), key=lambda row: row[0])

    read_committed = values(kafka.records(topic, "read_committed"))
    assert read_committed == in_log_order(committed, last)
    read_uncommitted = values(kafka.records(topic, "read_uncommitted"))
    assert read_uncommitted == in_log_order(committed, aborted, last)


def test_a_restart_and_a_crash_keep_the_data(kafka: KafkaBroker) -> None:
    topic = new_topic(kafka, partitions=2)
    producer = Producer(kafka.config(enable_idempotence=True))
    send(producer, topic, [(0, b"before"), (1, b"before")])
    del producer
    kafka.restart()
    assert values(kafka.records(topic)) == [(0, b"before"), (1, b"before")]
    kafka.restart(kill=True)  # kill -9: the log is recovered from disk
    producer = Producer(kafka.config(enable_idempotence=True))
    send(producer, topic, [(1, b"after")])
    del producer
    assert values(kafka.records(topic)) == [(0, b"before"), (1, b"before"), (1, b"after")]


def test_a_broker_restarted_from_a_thread_outlives_the_thread() -> None:
    """Linux's parent-death signal follows the thread that forked the broker: a restart
    from a thread that then ends (the Kafka chaos test kills the broker mid-epoch from
    one) must leave the broker serving."""
    import threading
    import time

    broker = start_broker()
    try:
        restarter = threading.Thread(target=broker.restart, kwargs={"kill": True})
        restarter.start()
        restarter.join()
        time.sleep(2)  # a parent-death SIGTERM would have stopped it by now
        assert broker.process is not None and broker.process.poll() is None, broker.log_tail()
        assert broker.admin().list_topics(timeout=10).brokers
    finally:
        broker.remove()
