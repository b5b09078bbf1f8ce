"""README's Kafka block (Spark's own Kafka source through ``from_stream``), run by
tests/spark/test_spark_kafka_source.py in a process of its own whose session starts with
Spark's Kafka package (a session gets jars only when it starts). It runs the block, sends
more records, runs the block again, and prints what the FileSink held after each run.

Usage: ``python kafka_stream_job.py PLAN.json``; the plan names the Spark settings
(``spark_options``), the broker (``bootstrap``), the ``topic`` and its ``partitions``, the
job's ``folder``, how many records were sent before (``sent``) and to send between the
runs (``more``)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from job_scripts import print_result, start_session

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_kafka_block() -> str:
    """README's block fenced ``python kafka`` (tests/test_docs.py runs the others)."""
    (block,) = re.findall(r"^```python kafka\n(.*?)^```", README.read_text(), re.S | re.M)
    return str(block)


def produce_orders(
    bootstrap: str, topic: str, partitions: int, first: int, count: int
) -> list[dict[str, Any]]:
    """Send orders ``first`` to ``first + count - 1`` over the topic's partitions (key:
    the customer, value: the amount); each as the broker stored it, with its offset."""
    from confluent_kafka import Producer

    stored: list[dict[str, Any]] = []

    def delivered(error: Any, message: Any) -> None:
        assert error is None, f"order not stored: {error}"
        key, value = message.key().decode(), message.value().decode()
        place = {"partition": message.partition(), "offset": message.offset()}
        stored.append({"key": key, "value": value, **place})

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for n in range(first, first + count):
        key, value = f"customer-{n % 5}".encode(), str(n * 7 % 100).encode()
        producer.produce(topic, value, key=key, partition=n % partitions, on_delivery=delivered)
    assert producer.flush(30) == 0, "orders left unsent"
    return stored


def main(plan: dict[str, Any]) -> dict[str, Any]:
    import pyspark

    os.environ["KAFKA_BOOTSTRAP"] = plan["bootstrap"]  # where README's block reads them
    os.environ["ORDERS_TOPIC"] = plan["topic"]
    os.environ["JOB_FOLDER"] = plan["folder"]
    start_session("local[2]", plan["spark_options"])
    block = compile(readme_kafka_block(), "README.md Kafka block", "exec")
    runs = []
    for more in (0, plan["more"]):
        args = (plan["bootstrap"], plan["topic"], plan["partitions"], plan["sent"], more)
        sent = produce_orders(*args) if more else []
        namespace: dict[str, Any] = {"__name__": "readme_kafka"}
        exec(block, namespace)
        run = namespace["run"]
        rows = pq.read_table(f"{plan['folder']}/out").to_pylist()
        runs.append({"status": run.status, "epochs": run.epochs, "sent": sent, "rows": rows})
    return {"pyspark": pyspark.__version__, "runs": runs}


if __name__ == "__main__":
    with open(sys.argv[1]) as plan_file:
        print_result(main(json.load(plan_file)))
