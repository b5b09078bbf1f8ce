"""KafkaSink on the session's real broker, without Spark: its checks before Spark starts,
the records it makes of rows (key, value, headers, partition and topic per row), at
least once through a sink subtask's lifecycle, and exactly once on the driver — a
transaction a dead driver left open is aborted and its producer fenced at the next
start, a checkpoint is sent once with its marker, a damaged staged file is refused.
The kit's scenarios run on it in test_sink_conformance.py."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka_server import KafkaBroker

from flintlock import StreamExecutionEnvironment
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.datastream import environment
from flintlock.core.harnesses import OneInputHarness
from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import build_registry
from flintlock.errors import CommittableError, SinkOutputError
from flintlock.plugin_api import CommitContext, OutputCheckContext
from flintlock.sinks.kafka import KafkaSink
from flintlock.sinks.kafka_commit import kafka_step, marker_group, transactional_id
from flintlock.sinks.kafka_records import RecordLayout

ORDERS = pa.schema(
    [("id", pa.int64()), ("user", pa.string()), ("part", pa.int32()), ("route", pa.string())]
)


def orders(ids: range, route: str = "a") -> pa.RecordBatch:
    return pa.record_batch(
        [
            pa.array(list(ids), pa.int64()),
            pa.array([f"user-{i % 3}" for i in ids]),
            pa.array([i % 2 for i in ids], pa.int32()),
            pa.array([route] * len(ids)),
        ],
        schema=ORDERS,
    )


def topic(kafka: KafkaBroker, partitions: int = 2) -> str:
    return kafka.create_topic(f"t{uuid.uuid4().hex[:10]}", partitions)


def subtask(sink: KafkaSink, tmp_path: Path, job_id: str = "job-1", **more: Any) -> Any:
    """One sink subtask through the real task lifecycle (the harness's StreamTask)."""
    registry = build_registry(build_plugin_manager((), use_entry_points=True))
    operator = registry.get("operator", "two_phase_commit_sink")(sink, name="orders")
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path / "chk"))
    return OneInputHarness(
        operator, storage=storage, job_name="job", job_id=job_id, task_name="orders", **more
    )


def context(tmp_path: Path, checkpoint_id: int, job_id: str = "job-1") -> CommitContext:
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path / "chk"))
    return CommitContext("job", "run-1", checkpoint_id, storage, job_id, "orders")


def check(sink: KafkaSink, schema: pa.Schema = ORDERS) -> None:
    sink.input_schema = schema
    sink.check_output(OutputCheckContext("job", "orders"))


# ---- before Spark starts ----


def test_a_missing_topic_is_refused_before_spark_naming_it(kafka: KafkaBroker) -> None:
    with pytest.raises(SinkOutputError) as refused:
        check(KafkaSink("no_such_topic", kafka.bootstrap))
    message = str(refused.value)
    assert "KafkaSink 'orders' of job 'job'" in message
    assert "['no_such_topic'] do not exist" in message and "does not create topics" in message


def test_execute_refuses_a_missing_topic_before_asking_for_spark(
    kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def spark_would_start(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("execute() reached the Spark session: the check came too late")

    monkeypatch.setattr(environment, "active_or_local_session", spark_would_start)
    env = StreamExecutionEnvironment(parallelism=2, checkpoint_dir=str(tmp_path / "chk"))
    env.from_collection([{"id": 1}]).sink_to(KafkaSink("missing_orders", kafka.bootstrap))
    with pytest.raises(SinkOutputError, match=r"\['missing_orders'\] do not exist"):
        env.execute("load")


def test_unreachable_brokers_are_refused_naming_them() -> None:
    sink = KafkaSink("orders", "127.0.0.1:9", producer_config={"socket.timeout.ms": 2000})
    with pytest.raises(SinkOutputError, match=r"brokers 127\.0\.0\.1:9 do not answer"):
        check(sink)


def test_a_column_the_stream_lacks_is_refused(kafka: KafkaBroker) -> None:
    with pytest.raises(SinkOutputError, match=r"the stream has no column \['customer'\]"):
        check(KafkaSink(topic(kafka), kafka.bootstrap, key="customer"))
    with pytest.raises(SinkOutputError, match="the partition column 'user' is not integer"):
        check(KafkaSink(topic(kafka), kafka.bootstrap, partition="user"))


def test_a_reserved_producer_setting_is_refused() -> None:
    with pytest.raises(SinkOutputError, match=r"may not set \['transactional.id'\]"):
        KafkaSink("t", "b:1", producer_config={"transactional.id": "mine"})


def test_a_batch_becomes_produce_arguments_a_column_at_a_time() -> None:
    layout = RecordLayout(
        "fallback",
        key="user",
        value="payload",
        headers={"n": "id"},
        partition="part",
        topic_column="route",
    )
    batch = pa.record_batch(
        {
            "user": ["\u00fc", None],
            "payload": pa.array([b"\x00b", None], pa.binary()),
            "id": [1, None],
            "part": pa.array([1, None], pa.int32()),
            "route": ["a", "b"],
        }
    )
    made = layout.produce_arguments(batch, "sink")
    assert (made.rows, made.topic, made.topics) == (2, "fallback", ["a", "b"])
    assert made.keys == ["\u00fc".encode(), None]  # strings as UTF-8, nulls as no key
    assert made.values == [b"\x00b", None]
    assert made.partitions == [1, -1]  # null: the partitioner's choice
    assert made.headers == [[("n", b"1")], [("n", None)]]
    whole_rows = RecordLayout("t").produce_arguments(batch.select(["id", "route"]), "sink")
    assert whole_rows.values == [b'{"id":1,"route":"a"}', b'{"id":null,"route":"b"}']
    assert (whole_rows.topics, whole_rows.keys, whole_rows.partitions) == (None, None, None)
    no_topic = batch.set_column(4, "route", pa.array(["a", None]))
    with pytest.raises(SinkOutputError, match="sink: a row's topic column 'route' is null"):
        layout.produce_arguments(no_topic, "sink")


# ---- at least once ----


def test_at_least_once_sends_keys_headers_partitions_and_topics_per_row(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    first, second = topic(kafka), topic(kafka)
    sink = KafkaSink(
        first,
        kafka.bootstrap,
        key="user",
        value="id",
        headers={"who": "user"},
        partition="part",
        topic_column="route",
        delivery="at-least-once",
    )
    check(sink)
    task = subtask(sink, tmp_path)
    task.process_batch(orders(range(0, 6), route=first))
    task.process_batch(orders(range(6, 10), route=second))
    task.checkpoint(1)  # pre_commit flushed: readers see the rows, no commit needed
    for name, ids in ((first, range(0, 6)), (second, range(6, 10))):
        records = kafka.records(name, "read_committed")
        assert sorted(int(r.value()) for r in records) == list(ids)
        for record in records:
            i = int(record.value())
            assert record.partition() == i % 2
            assert record.key() == f"user-{i % 3}".encode()
            assert record.headers() == [("who", f"user-{i % 3}".encode())]


def test_at_least_once_json_rows_reach_the_topic_at_the_checkpoint(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    name = topic(kafka)
    sink = KafkaSink(name, kafka.bootstrap, delivery="at-least-once")
    task = subtask(sink, tmp_path)
    task.process_batch(orders(range(5), route="x"))
    task.checkpoint(1)
    values = [json.loads(r.value()) for r in kafka.records(name)]
    assert sorted(values, key=lambda v: v["id"]) == [
        {"id": i, "user": f"user-{i % 3}", "part": i % 2, "route": "x"} for i in range(5)
    ]


# ---- exactly once ----


def staged_checkpoint(sink: KafkaSink, tmp_path: Path, ids: range, checkpoint_id: int) -> Any:
    task = subtask(sink, tmp_path, epoch=checkpoint_id)
    task.process_batch(orders(ids))
    task.checkpoint(checkpoint_id)
    return task.acknowledgement.committables["orders"]


def test_rows_are_invisible_until_the_commit_then_sent_once_with_the_marker(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    name = topic(kafka)
    sink = KafkaSink(name, kafka.bootstrap, key="user")
    committables = staged_checkpoint(sink, tmp_path, range(8), 1)
    assert kafka.records(name, "read_uncommitted") == []  # staged, not sent
    sink.commit(context(tmp_path, 1), committables)
    KafkaSink(name, kafka.bootstrap, key="user").commit(context(tmp_path, 1), committables)
    assert sorted(json.loads(r.value())["id"] for r in kafka.records(name)) == list(range(8))
    reader = Consumer(kafka.config(group_id=marker_group("job-1", "orders")))
    try:
        [marker] = reader.committed([TopicPartition(name, 0)], timeout=10)
    finally:
        reader.close()
    assert marker.offset == 1  # the checkpoint id, committed with the rows
    assert list((tmp_path / "chk").rglob("*.arrow")) == []  # sent: staged files deleted


def test_a_dead_drivers_open_transaction_is_aborted_and_its_producer_fenced(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    name = topic(kafka)
    zombie = Producer(kafka.config(transactional_id=transactional_id("job-1", "orders")))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(name, value=b'{"id": -1}', partition=0)
    zombie.flush(30)  # sent in a transaction the dead driver never ends
    sink = KafkaSink(name, kafka.bootstrap)
    sink.abort_uncommitted(context(tmp_path, 0), [])  # a new driver's start
    committables = staged_checkpoint(sink, tmp_path, range(4), 2)
    sink.commit(context(tmp_path, 2), committables)
    assert sorted(json.loads(r.value())["id"] for r in kafka.records(name)) == [0, 1, 2, 3]
    with pytest.raises(KafkaException, match="fenced"):
        zombie.commit_transaction(10)


def test_a_damaged_staged_file_is_refused_naming_it(kafka: KafkaBroker, tmp_path: Path) -> None:
    name = topic(kafka)
    sink = KafkaSink(name, kafka.bootstrap)
    [committable] = staged_checkpoint(sink, tmp_path, range(6), 1)
    with open(committable["path"], "ab") as file:
        file.write(b"garbage")
    with pytest.raises(CommittableError, match=f"{committable['path']} of checkpoint 1"):
        sink.commit(context(tmp_path, 1), [committable])
    assert kafka.records(name, "read_uncommitted") == []  # nothing sent, nothing open


def test_a_retriable_kafka_error_is_tried_again_and_another_is_named() -> None:
    from confluent_kafka import KafkaError

    # what Consumer.committed raises after a broker restart: no retriable flag set
    answers = [
        KafkaError(KafkaError.NOT_COORDINATOR, "Not coordinator"),
        KafkaError(KafkaError.REQUEST_TIMED_OUT, "timed out", retriable=True),
    ]
    calls: list[int] = []

    def committed() -> str:
        calls.append(1)
        if answers:
            raise KafkaException(answers.pop())
        return "marker"

    assert kafka_step(committed, "reading the marker", "brokers b:1") == "marker"
    assert len(calls) == 3

    def fenced() -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer producer"))

    with pytest.raises(SinkOutputError, match=r"^reading the marker failed \(brokers b:1\): "):
        kafka_step(fenced, "reading the marker", "brokers b:1")

    def always_moving() -> None:
        raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "moved", retriable=True))

    with pytest.raises(SinkOutputError, match="moved"):
        kafka_step(always_moving, "reading the marker", "brokers b:1", timeout=0.5)


def test_a_kafka_step_that_blocks_past_its_timeout_fails_naming_the_step() -> None:
    """librdkafka's ``send_offsets_to_transaction`` was seen blocking minutes past its
    timeout after the broker was killed mid-call (the Kafka chaos suite's driver hung):
    a step that does not return in its timeout plus a grace is an error naming it."""
    import threading
    import time

    from flintlock import SinkOutputError
    from flintlock.sinks.kafka_commit import kafka_step

    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(SinkOutputError, match="sending the marker did not return within"):
        kafka_step(lambda: release.wait(5), "sending the marker", "txn t", timeout=0.2, grace=0.2)
    release.set()
    assert time.monotonic() - started < 2
