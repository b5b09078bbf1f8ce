"""Spark's own Kafka source through ``from_stream`` (issue 35, point 4): README's Kafka
block reads a topic of the test broker (tests/kafka_server.py) into a FileSink, each
record once, and a second run reads only what arrived since (Spark's offsets, kept in the
job's folder).

Spark's Kafka connector (``spark-sql-kafka-0-10``) runs only on the Spark it was built
for, and Maven Central serves none for this project's pyspark 4.3.0 yet. So the job runs
in a process of its own (tests/spark/kafka_stream_job.py) on pyspark ``KAFKA_SPARK``,
pip-installed once into the test cache, with the connector of that very version fetched
by ``spark.jars.packages`` (tests/jar_cache.py); the shared session never gets its jars."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from jar_cache import pyspark_environment, spark_packages_options
from job_scripts import run_script
from kafka_server import KafkaBroker
from kafka_stream_job import produce_orders

pytestmark = pytest.mark.slow

KAFKA_SPARK = "4.2.0"
"""The job's pyspark: the newest Spark whose Kafka connector Maven Central serves. Make it
``pyspark.__version__`` once the connector of the project's pyspark is published."""
CONNECTOR = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{KAFKA_SPARK}"
PARTITIONS, FIRST, MORE = 3, 120, 30


def by_place(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows in (partition, offset) order, each once per time it was read."""
    return sorted(rows, key=lambda row: (row["partition"], row["offset"]))


def test_spark_kafka_source_via_from_stream_reads_each_record_once_and_resumes(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka.create_topic(f"orders-{uuid.uuid4().hex[:8]}", PARTITIONS)
    sent = produce_orders(kafka.bootstrap, topic, PARTITIONS, 0, FIRST)
    plan = {
        "spark_options": spark_packages_options([CONNECTOR], tmp_path),
        "bootstrap": kafka.bootstrap,
        "topic": topic,
        "partitions": PARTITIONS,
        "folder": str(tmp_path / "job"),
        "sent": FIRST,
        "more": MORE,
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    environment = pyspark_environment(KAFKA_SPARK)
    script = Path(__file__).with_name("kafka_stream_job.py")
    result = run_script(script, tmp_path / "plan.json", env=environment, timeout=900)

    assert result["pyspark"] == KAFKA_SPARK  # the connector's own Spark ran the job
    first, second = result["runs"]
    assert first["status"] == "STOPPED"
    assert first["epochs"] == FIRST // 60  # maxOffsetsPerTrigger: one micro-batch per epoch
    assert by_place(first["rows"]) == by_place(sent)
    assert (second["status"], second["epochs"], len(second["sent"])) == ("STOPPED", 1, MORE)
    assert by_place(second["rows"]) == by_place(sent + second["sent"])  # the new ones, once
