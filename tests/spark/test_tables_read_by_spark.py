"""Tables read back by Spark itself (issue 34, point 4): Spark with Delta's own connector
(``delta-spark``) and Iceberg's Spark runtime reads the tables flintlock's DeltaSink and
IcebergSink wrote over several checkpoints (rows equal a plain-Python reference, one
commit or snapshot per checkpoint), and flintlock reads tables that Spark wrote.

The connectors fit only the Spark they were built for, and none is built for this
project's pyspark 4.3 yet (delta-spark 4.4.0, built on Spark 4.2, fails on 4.3 with a
NoSuchMethodError on ``LogicalRDD``; iceberg-spark-runtime-4.1 1.12.0 with an
IncompatibleClassChangeError on ``SparkView``). So the reader is a Spark 4.1 process of
its own (tests/spark/spark_table_reader.py): its pyspark is pip-installed and the jars are
fetched from Maven Central by ``spark.jars.packages`` into one cache per machine
(``$FLINTLOCK_TEST_JARS``, else ~/.cache/flintlock-test-jars) on first use. One reader
process serves the whole module; the tests' shared session never gets these jars."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from delta_tables import read_delta
from jar_cache import pyspark_environment, spark_packages_options
from job_scripts import run_script

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.sinks.delta import DeltaSink
from flintlock.sinks.iceberg import IcebergSink
from flintlock.sinks.iceberg_tables import catalog_spec, load_catalog

pytestmark = pytest.mark.slow

READER_PYSPARK = "4.1.4"
PACKAGES = [
    "io.delta:delta-spark_2.13:4.2.0",  # built on Spark 4.1
    "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
    "org.xerial:sqlite-jdbc:3.54.1.0",  # the embedded catalog is SQLite
]
EPOCHS, PER_EPOCH = 3, 10
REFERENCE = list(range(EPOCHS * PER_EPOCH))
"""The ids a job of EPOCHS epochs of PER_EPOCH rows writes, each once."""


def run_spark(plan: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Runs the reader process on ``plan``; what it read."""
    plan_file = folder / "plan.json"
    options = spark_packages_options(PACKAGES, folder)
    plan_file.write_text(json.dumps({**plan, "spark_options": options}))
    script = Path(__file__).with_name("spark_table_reader.py")
    return run_script(script, plan_file, env=pyspark_environment(READER_PYSPARK), timeout=900)


def write_in_epochs(spark: Any, base: Path, name: str, sink: Any) -> None:
    """An unbounded job writing REFERENCE's ids in EPOCHS checkpoints into ``sink``."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/{name}")
    env.from_sequence(end=len(REFERENCE), rows_per_epoch=PER_EPOCH).sink_to(sink, name="out")
    result = env.execute(name, trigger=EpochTrigger.processing_time(0.0))
    assert result.epochs == EPOCHS


@pytest.fixture(scope="module")
def tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """flintlock writes a Delta and an Iceberg table; one Spark process reads both and
    writes one of each for flintlock; the folder and what Spark read."""
    base = tmp_path_factory.mktemp("tables")
    warehouse = base / "warehouse"
    write_in_epochs(spark, base, "to-delta", DeltaSink(f"{base}/delta"))
    write_in_epochs(spark, base, "to-iceberg", IcebergSink("db.out", warehouse=str(warehouse)))
    plan = {
        "delta_read": [f"{base}/delta"],
        "delta_write": [f"{base}/spark-delta"],
        "warehouse": str(warehouse),
        "iceberg_read": ["db.out"],
        "iceberg_write": ["db.spark_made"],
    }
    return {"base": base, "warehouse": str(warehouse), "read": run_spark(plan, base)}


def test_spark_reads_a_delta_table_flintlock_wrote_one_commit_per_checkpoint(
    tables: dict[str, Any],
) -> None:
    uri = f"{tables['base']}/delta"
    read = tables["read"]["delta"][uri]
    assert [row["id"] for row in read["rows"]] == REFERENCE
    assert read["rows"] == sorted(read_delta(uri).to_pylist(), key=lambda row: row["id"])
    assert sorted(h["version"] for h in read["history"]) == list(range(EPOCHS))
    commits = [
        json.loads(line)
        for f in sorted(Path(uri, "_delta_log").glob("*.json"))
        for line in f.read_text().splitlines()
    ]
    ids = [c["commitInfo"]["flintlock.checkpoint_id"] for c in commits if "commitInfo" in c]
    assert ids == [str(n) for n in range(1, EPOCHS + 1)]  # flintlock's commit info


def test_spark_reads_an_iceberg_table_flintlock_wrote_one_snapshot_per_checkpoint(
    tables: dict[str, Any],
) -> None:
    read = tables["read"]["iceberg"]["db.out"]
    assert [row["id"] for row in read["rows"]] == REFERENCE
    catalog = load_catalog(catalog_spec(None, tables["warehouse"], "t"), "t")
    ours = catalog.load_table("db.out").scan().to_arrow().sort_by("id").to_pylist()
    assert read["rows"] == ours
    checkpoints = [s["summary"]["flintlock.max-committed-checkpoint-id"] for s in read["snapshots"]]
    assert sorted(checkpoints) == [str(n) for n in range(1, EPOCHS + 1)]
    assert {s["operation"] for s in read["snapshots"]} == {"append"}


def test_flintlock_reads_a_delta_table_spark_wrote(spark: Any, tables: dict[str, Any]) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    stream = env.from_delta(f"{tables['base']}/spark-delta")
    stream.sink_to(env.registry.get("sink", "collect")(name="ids", schema=stream.schema))
    result = env.execute("read-spark-delta")
    assert sorted(result.collected["sink:ids"].column("id").to_pylist()) == list(range(10))


def test_flintlock_reads_an_iceberg_table_spark_wrote(spark: Any, tables: dict[str, Any]) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    stream = env.from_iceberg("db.spark_made", warehouse=tables["warehouse"])
    stream.sink_to(env.registry.get("sink", "collect")(name="rows", schema=stream.schema))
    rows = env.execute("read-spark-iceberg").collected["sink:rows"].sort_by("id").to_pylist()
    assert rows == [{"id": 0, "word": "zero"}, {"id": 1, "word": "one"}, {"id": 2, "word": "two"}]
