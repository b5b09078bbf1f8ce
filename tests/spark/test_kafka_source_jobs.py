"""``env.from_kafka`` on Spark against the real broker (tests/kafka_server.py): README's
``python from_kafka`` block runs as written, capped epochs read each record once; a
second run of the same job, at another parallelism, after more records and a partition
added to the topic, reads exactly the rest; the consumer group's committed offsets equal
each last checkpoint's. A bounded read skips an aborted transaction's records."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kafka_records import add_partition, in_place, order, produce_orders
from kafka_server import KafkaBroker

from flintlock import StreamExecutionEnvironment
from flintlock.checkpoints import load_checkpoint

pytestmark = pytest.mark.slow
README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block() -> str:
    (block,) = re.findall(r"^```python from_kafka\n(.*?)^```", README.read_text(), re.S | re.M)
    return block


def big_orders(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the README job writes for ``sent``: orders of amount >= 3, with their offset."""
    rows = [{**order(int(r["key"][1:])), "offset": r["offset"]} for r in sent]
    return sorted((r for r in rows if r["amount"] >= 3), key=lambda r: r["id"])


def group_offsets(kafka: KafkaBroker, group: str, topic: str, partitions: int) -> dict[str, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(kafka.config(group_id=group))
    try:
        asked = [TopicPartition(topic, p) for p in range(partitions)]
        return {f"{tp.topic}:{tp.partition}": tp.offset for tp in consumer.committed(asked, 30)}
    finally:
        consumer.close()


def checkpoint_offsets(job_folder: Path) -> dict[str, int]:
    (state,) = load_checkpoint(str(job_folder)).sources.values()
    return dict(state["offsets"])


def test_from_kafka_reads_each_record_once_across_runs_and_parallelisms(
    spark: Any, kafka: KafkaBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = kafka.create_topic(f"orders-{uuid.uuid4().hex[:8]}", 3)
    sent = produce_orders(kafka, topic, range(150), 3)
    monkeypatch.setenv("JOB_FOLDER", str(tmp_path))
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka.bootstrap)
    monkeypatch.setenv("ORDERS_TOPIC", topic)
    block = readme_block()
    first: dict[str, Any] = {"__name__": "readme_from_kafka"}
    exec(compile(block, "README.md python from_kafka block", "exec"), first)

    assert (first["run"].status, first["run"].epochs) == ("STOPPED", 2)  # 99 + 51 records
    written = pq.read_table(tmp_path / "out").to_pylist()
    assert sorted(written, key=lambda r: r["id"]) == big_orders(sent)
    totals = {r["customer"]: r["amount_sum"] for r in first["totals"].to_pylist()}
    expected: dict[str, int] = {}
    for row in big_orders(sent):
        expected[row["customer"]] = expected.get(row["customer"], 0) + row["amount"]
    assert totals == expected
    job_folder = tmp_path / "checkpoints" / "big-orders"
    assert checkpoint_offsets(job_folder) == {f"{topic}:{p}": 50 for p in range(3)}
    assert group_offsets(kafka, "orders-to-files", topic, 3) == checkpoint_offsets(job_folder)

    more = produce_orders(kafka, topic, range(150, 210), 3)
    add_partition(kafka, topic, 4)
    newest = produce_orders(kafka, topic, range(210, 230), 4)
    rescaled = block.replace("parallelism=2", "parallelism=3")
    assert rescaled != block
    second: dict[str, Any] = {"__name__": "readme_from_kafka_again"}
    exec(compile(rescaled, "README.md python from_kafka block, parallelism 3", "exec"), second)

    assert (second["run"].status, second["run"].epochs) == ("STOPPED", 1)
    written = pq.read_table(tmp_path / "out").to_pylist()
    assert sorted(written, key=lambda r: r["id"]) == big_orders(sent + more + newest)
    offsets = {f"{topic}:{p}": 75 for p in range(3)} | {f"{topic}:3": 5}
    assert checkpoint_offsets(job_folder) == offsets
    assert group_offsets(kafka, "orders-to-files", topic, 4) == offsets


def test_a_bounded_read_with_aborted_transactions_is_the_committed_records(
    spark: Any, kafka: KafkaBroker
) -> None:
    topic = kafka.create_topic(f"orders-{uuid.uuid4().hex[:8]}", 3)
    sent = produce_orders(kafka, topic, range(40), 3, transactional_id=f"{topic}-a")
    produce_orders(kafka, topic, range(40, 50), 3, transactional_id=f"{topic}-b", abort=True)
    sent += produce_orders(kafka, topic, range(50, 60), 3)
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    stream = env.from_kafka(kafka.bootstrap, topics=[topic], bounded=True, batch_size=7)
    produce_orders(kafka, topic, range(60, 70), 3)  # after the build: past the end offsets
    table = stream.collect(job_name="bounded-kafka")
    assert in_place(table.to_pylist()) == in_place(sent)
