"""Spark with Delta's and Iceberg's own Spark connectors, run as a process of its own by
tests/spark/test_tables_read_by_spark.py: it reads the tables flintlock wrote (rows and
histories) and writes tables for flintlock to read, then prints one JSON document.

Usage: ``python spark_table_reader.py PLAN.json`` where the plan names the Delta tables to
read (``delta_read``) and to write (``delta_write``), the embedded Iceberg catalog's
``warehouse`` with its tables to read (``iceberg_read``) and to write (``iceberg_write``),
and the Spark settings that fetch the connectors' jars (``spark_options``)."""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession

CATALOG = "flintlock"
"""The embedded catalog's name: the SQL catalog's rows are keyed by it."""


def session(plan: dict[str, Any]) -> SparkSession:
    """A local session with Delta's and Iceberg's extensions; Iceberg's JDBC catalog opens
    the SQLite file pyiceberg's SQL catalog keeps under the warehouse."""
    warehouse = plan["warehouse"]
    extensions = (
        "io.delta.sql.DeltaSparkSessionExtension,"
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
    )
    prefix = f"spark.sql.catalog.{CATALOG}"
    settings = {
        **plan["spark_options"],  # the connectors' packages and where Ivy keeps them
        "spark.sql.extensions": extensions,
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": f"jdbc:sqlite:{warehouse}/catalog.db",
        f"{prefix}.warehouse": warehouse,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "1",
        "spark.driver.memory": "1g",
    }
    builder = SparkSession.builder.master("local[1]").appName("flintlock-table-reader")
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def rows(spark: SparkSession, query: str) -> list[dict[str, Any]]:
    return [row.asDict() for row in spark.sql(query).collect()]


def main(plan: dict[str, Any]) -> dict[str, Any]:
    spark = session(plan)
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {"spark": spark.version, "delta": {}, "iceberg": {}}
    for path in plan["delta_read"]:
        history = rows(spark, f"DESCRIBE HISTORY delta.`{path}`")
        out["delta"][path] = {
            "rows": rows(spark, f"SELECT * FROM delta.`{path}` ORDER BY id"),
            "history": [{"version": h["version"], "operation": h["operation"]} for h in history],
        }
    for table in plan["iceberg_read"]:
        name = f"{CATALOG}.{table}"
        out["iceberg"][table] = {
            "rows": rows(spark, f"SELECT * FROM {name} ORDER BY id"),
            "snapshots": rows(spark, f"SELECT operation, summary FROM {name}.snapshots"),
        }
    for path in plan["delta_write"]:  # two commits: two versions for flintlock to read
        spark.range(0, 5).write.format("delta").save(path)
        spark.range(5, 10).write.format("delta").mode("append").save(path)
    for table in plan["iceberg_write"]:
        name = f"{CATALOG}.{table}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{table.split('.')[0]}")
        spark.sql(f"CREATE TABLE {name} (id BIGINT, word STRING) USING iceberg")
        spark.sql(f"INSERT INTO {name} VALUES (0, 'zero'), (1, 'one')")
        spark.sql(f"INSERT INTO {name} VALUES (2, 'two')")
    spark.stop()
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as plan_file:
        result = main(json.load(plan_file))
    print("RESULT " + json.dumps(result, default=str))
