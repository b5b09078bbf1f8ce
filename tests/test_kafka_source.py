"""The kafka source without Spark: its readers and its epoch planning against the real
broker of tests/kafka_server.py, compared with what the tests produced."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa
import pytest
from kafka_records import BASE_MS, add_partition, in_place, order, produce_orders
from kafka_server import KafkaBroker

from flintlock import (
    EventTimeError,
    PluginError,
    Source,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from flintlock.plugins.kafka_source import KafkaStreamSource, capped_ranges, kafka_source


def new_topic(kafka: KafkaBroker, partitions: int) -> str:
    return kafka.create_topic(f"orders-{uuid.uuid4().hex[:8]}", partitions)


def read_all(source: Source, parallelism: int) -> list[dict[str, Any]]:
    rows = []
    for subtask in range(parallelism):
        reader = source.create_reader(subtask, parallelism, {})
        for batch in reader.read():
            assert batch.schema == source.schema
            rows += batch.to_pylist()
        reader.close()
    return in_place(rows)


def read_epoch(source: KafkaStreamSource, assignments: list[list[Any]]) -> list[dict[str, Any]]:
    rows = []
    for subtask, splits in enumerate(assignments):
        reader = source.create_epoch_reader(subtask, len(assignments), splits)
        for batch in reader.read():
            rows += batch.to_pylist()
        reader.close()
    return in_place(rows)


def test_a_bounded_read_of_three_partitions_is_what_was_produced(kafka: KafkaBroker) -> None:
    topic = new_topic(kafka, 3)
    sent = produce_orders(kafka, topic, range(60), 3)
    source = kafka_source(bootstrap_servers=kafka.bootstrap, topics=[topic], bounded=True)
    produce_orders(kafka, topic, range(60, 70), 3)  # after the build: not read
    assert source.bounded
    assert read_all(source, 2) == in_place(sent)
    assert source.schema.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "headers",
    ]
    restored = source.create_reader(0, 1, {f"{topic}:0": 15, f"{topic}:1": 20, f"{topic}:2": 20})
    offsets = [row["offset"] for batch in restored.read() for row in batch.to_pylist()]
    restored.close()
    assert offsets == list(range(15, 20))  # from its positions on, to the end seen at build


def test_epochs_read_each_record_once_at_any_parallelism_and_new_partitions(
    kafka: KafkaBroker,
) -> None:
    topic = new_topic(kafka, 3)
    sent = produce_orders(kafka, topic, range(30), 3)
    source = kafka_source(bootstrap_servers=kafka.bootstrap, topics=[topic])
    assert isinstance(source, KafkaStreamSource)
    first = source.plan_epoch(source.initial_state(0), 0, 2)
    assert source.plan_epoch(source.initial_state(0), 0, 2) == first  # planned again: the same
    assert read_epoch(source, first.assignments) == in_place(sent)
    assert first.state == {"offsets": {f"{topic}:{p}": 10 for p in range(3)}}

    more = produce_orders(kafka, topic, range(30, 45), 3)
    add_partition(kafka, topic, 4)
    newest = produce_orders(kafka, topic, range(45, 53), 4)  # partition 3 gets 2 of them
    second = source.plan_epoch(first.state, 0, 3)  # restored at another parallelism
    assert [len(splits) for splits in second.assignments] == [2, 1, 1]
    assert read_epoch(source, second.assignments) == in_place(more + newest)
    assert second.state["offsets"][f"{topic}:3"] == 2
    nothing = source.plan_epoch(second.state, 0, 3)
    assert nothing.assignments == [[], [], []] and nothing.state == second.state


def test_max_records_per_epoch_splits_the_backlog_in_proportion() -> None:
    offsets = {"t:0": 0, "t:1": 10, "t:2": 5}
    ends = {"t:0": 100, "t:1": 60, "t:2": 5}
    assert capped_ranges(offsets, ends, 30) == {"t:0": (0, 20), "t:1": (10, 20)}
    assert capped_ranges(offsets, ends, None) == {"t:0": (0, 100), "t:1": (10, 60)}
    assert capped_ranges({"t:0": 0}, {"t:0": 3}, 1000) == {"t:0": (0, 3)}


def test_aborted_transactions_are_not_read(kafka: KafkaBroker) -> None:
    topic = new_topic(kafka, 2)
    committed = produce_orders(kafka, topic, range(10), 2, transactional_id=f"{topic}-a")
    produce_orders(kafka, topic, range(10, 20), 2, transactional_id=f"{topic}-b", abort=True)
    committed += produce_orders(kafka, topic, range(20, 26), 2, transactional_id=f"{topic}-c")
    produce_orders(kafka, topic, range(26, 30), 2, transactional_id=f"{topic}-d", abort=True)
    source = kafka_source(bootstrap_servers=kafka.bootstrap, topics=[topic], timeout_seconds=20)
    planned = source.plan_epoch(source.initial_state(0), 0, 1)
    assert read_epoch(source, planned.assignments) == in_place(committed)  # ends on markers
    read_uncommitted = kafka_source(
        bootstrap_servers=kafka.bootstrap,
        topics=[topic],
        bounded=True,
        client_config={"isolation.level": "read_uncommitted"},
    )
    assert len(read_all(read_uncommitted, 1)) == 30


def test_json_values_into_a_schema_and_a_bad_record_named(kafka: KafkaBroker) -> None:
    topic = new_topic(kafka, 1)
    produce_orders(kafka, topic, range(5), 1)
    schema = pa.schema([("id", pa.int64()), ("amount", pa.int32()), ("customer", pa.string())])
    options = {"bootstrap_servers": kafka.bootstrap, "topics": [topic], "bounded": True}
    source = kafka_source(**options, value_format="json", schema=schema)
    rows = read_all(source, 1)
    assert [row["value"] for row in rows] == [order(i) for i in range(5)]
    assert source.schema.field("value").type == pa.struct(list(schema))
    assert rows[1]["timestamp"].timestamp() * 1000 == BASE_MS + 1000

    from confluent_kafka import Producer

    producer = Producer(kafka.config())
    producer.produce(topic, value=json.dumps({"id": "seven"}).encode(), partition=0)
    producer.flush(30)
    bad = kafka_source(**options, value_format="json", schema=schema)
    with pytest.raises(PluginError, match=rf"topic '{topic}' partition 0 offset 5 does not"):
        read_all(bad, 1)
    texts = read_all(kafka_source(**options, value_format="utf-8"), 1)
    assert texts[0]["value"] == json.dumps(order(0))


def test_starting_offsets_by_timestamp_and_per_partition(kafka: KafkaBroker) -> None:
    topic = new_topic(kafka, 2)
    sent = produce_orders(kafka, topic, range(20), 2)
    options = {"bootstrap_servers": kafka.bootstrap, "topics": [topic], "bounded": True}
    by_time = kafka_source(**options, starting_offsets={"timestamp": BASE_MS + 14_000})
    assert [json.loads(r["value"])["id"] for r in read_all(by_time, 1)] == [14, 16, 18, 15, 17, 19]
    explicit = kafka_source(**options, starting_offsets={topic: {1: 8}})
    assert read_all(explicit, 2) == in_place([r for r in sent if r["partition"] == 0]) + [
        r for r in in_place(sent) if r["partition"] == 1 and r["offset"] >= 8
    ]
    latest = kafka_source(
        bootstrap_servers=kafka.bootstrap, topics=[topic], starting_offsets="latest"
    )
    assert latest.plan_epoch(latest.initial_state(0), 0, 1).assignments == [[]]


def test_errors_before_spark_name_the_topic_partition_or_broker(kafka: KafkaBroker) -> None:
    topic = new_topic(kafka, 2)
    env = StreamExecutionEnvironment(parallelism=1)
    with pytest.raises(PluginError, match="topic 'no-such-topic' does not exist"):
        env.from_kafka(kafka.bootstrap, topics=["no-such-topic"])
    with pytest.raises(PluginError, match=r"127.0.0.1:9 did not answer within 2"):
        env.from_kafka("127.0.0.1:9", topics=[topic], timeout_seconds=2)
    with pytest.raises(PluginError, match=rf"offset 5 of topic '{topic}' partition 1 is outside"):
        env.from_kafka(kafka.bootstrap, topics=[topic], starting_offsets={topic: {1: 5}})
    with pytest.raises(PluginError, match="partition 7 of topic"):
        env.from_kafka(kafka.bootstrap, topics=[topic], starting_offsets={topic: {7: 0}})
    with pytest.raises(PluginError, match="one of topics"):
        env.from_kafka(kafka.bootstrap)
    with pytest.raises(PluginError, match="needs schema"):
        env.from_kafka(kafka.bootstrap, topics=[topic], value_format="json")
    stream = env.from_kafka(kafka.bootstrap, topic_pattern=f"{topic[:-2]}.*", name="orders")
    assert stream.schema is not None and stream.schema.names[0] == "key"
    assert stream.timestamp_column == "timestamp"  # event time: the record timestamp
    late = WatermarkStrategy("timestamp", 5000)  # a watermark over it is accepted
    assert env.from_kafka(kafka.bootstrap, topics=[topic], watermark_strategy=late).schema
    with pytest.raises(EventTimeError, match="'ts' is not in the schema"):
        env.from_kafka(kafka.bootstrap, topics=[topic], watermark_strategy=WatermarkStrategy("ts"))


def test_planned_records_deleted_before_they_are_read_fail_naming_the_partition(
    kafka: KafkaBroker,
) -> None:
    from confluent_kafka import TopicPartition

    topic = new_topic(kafka, 1)
    produce_orders(kafka, topic, range(10), 1)
    source = kafka_source(bootstrap_servers=kafka.bootstrap, topics=[topic])
    planned = source.plan_epoch(source.initial_state(0), 0, 1)
    admin = kafka.admin()  # kept: its futures end with it
    deleted = admin.delete_records([TopicPartition(topic, 0, 6)])
    for future in deleted.values():
        future.result(30)
    with pytest.raises(PluginError, match=rf"topic '{topic}' partition 0 from offset 0"):
        read_epoch(source, planned.assignments)


def test_a_broker_restart_mid_read_loses_and_repeats_nothing(kafka: KafkaBroker) -> None:
    topic = new_topic(kafka, 2)
    sent = produce_orders(kafka, topic, range(300), 2)
    small_fetches = {  # the reader must go back to the broker after the restart
        "message.max.bytes": 1000,
        "fetch.max.bytes": 1100,
        "max.partition.fetch.bytes": 512,
        "queued.max.messages.kbytes": 1,
    }
    source = kafka_source(
        bootstrap_servers=kafka.bootstrap,
        topics=[topic],
        client_config=small_fetches,
        batch_size=20,
        timeout_seconds=60,
    )
    planned = source.plan_epoch(source.initial_state(0), 0, 1)
    reader = source.create_epoch_reader(0, 1, planned.assignments[0])
    batches = reader.read()
    rows = next(batches).to_pylist()
    kafka.restart(kill=True)
    for batch in batches:
        rows += batch.to_pylist()
    reader.close()
    assert in_place(rows) == in_place(sent)


def test_completed_checkpoints_commit_the_offsets_to_the_group(kafka: KafkaBroker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = new_topic(kafka, 3)
    produce_orders(kafka, topic, range(12), 3)
    group = f"monitor-{topic}"
    source = kafka_source(bootstrap_servers=kafka.bootstrap, topics=[topic], group_id=group)
    planned = source.plan_epoch(source.initial_state(0), 0, 2)
    source.notify_checkpoint_complete(1, planned.state)
    consumer = Consumer(kafka.config(group_id=group))
    committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
    consumer.close()
    assert {f"{tp.topic}:{tp.partition}": tp.offset for tp in committed} == planned.state["offsets"]


def test_a_fresh_process_plans_an_epoch(kafka: KafkaBroker) -> None:
    """The source in a process that never imported ``confluent_kafka.admin`` (a job
    script, spark-submit): it finds the partitions and plans (``import confluent_kafka``
    alone leaves the ``admin`` submodule out)."""
    import subprocess
    import sys

    topic = new_topic(kafka, 2)
    produce_orders(kafka, topic, range(10), 2)
    script = (
        "import sys\n"
        "from flintlock.plugins.kafka_source import kafka_source\n"
        "source = kafka_source(bootstrap_servers=sys.argv[1], topics=[sys.argv[2]])\n"
        "print(source.plan_epoch(source.initial_state(0), 0, 2).state['offsets'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, kafka.bootstrap, topic], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str({f"{topic}:0": 5, f"{topic}:1": 5})
