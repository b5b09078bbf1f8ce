"""IcebergSink and from_iceberg on real Spark, against a pyiceberg SQL catalog on a
SQLite file; the sink through the scenarios every exactly-once sink passes
(tests/spark/sink_scenarios.py), output read back with pyiceberg's own scan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sink_scenarios import (
    bounded_job,
    check_exactly_once,
    stop_resume_at_another_parallelism_and_drain,
)
from unbounded_jobs import OUT

from flintlock import SinkOutputError
from flintlock.sinks.iceberg import IcebergSink
from flintlock.sinks.iceberg_tables import catalog_spec, load_catalog

pytestmark = pytest.mark.slow


def read_back(warehouse: str, table: str = "db.out") -> list[dict[str, Any]]:
    """The table's rows, read by pyiceberg (not by flintlock)."""
    catalog = load_catalog(catalog_spec(None, warehouse, "test"), "test")
    return catalog.load_table(table).scan().to_arrow().to_pylist()


def test_a_bounded_job_writes_every_row_once(spark: Any, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    bounded_job(spark, str(tmp_path), IcebergSink("db.out", warehouse=warehouse, schema=OUT))
    check_exactly_once(read_back(warehouse), 1000, drained=True)


def test_stop_resume_at_another_parallelism_and_drain(spark: Any, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    stop_resume_at_another_parallelism_and_drain(
        spark,
        str(tmp_path),
        lambda: IcebergSink("db.out", warehouse=warehouse, schema=OUT, mode="append"),
        lambda: read_back(warehouse),
    )
    catalog = load_catalog(catalog_spec(None, warehouse, "test"), "test")
    table = catalog.load_table("db.out")
    assert all(s.summary.get("flintlock.job-id") for s in table.snapshots())
    committed = [p for p in (tmp_path / "warehouse").rglob("*.parquet") if "/data/" in str(p)]
    assert len(committed) == len(table.inspect.files())  # no leftovers beside the table


def test_a_job_whose_rows_do_not_fit_the_table_is_refused_before_spark_runs(
    spark: Any, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    wrong = pa.schema([("k", pa.string()), ("id", pa.int64())])
    catalog = load_catalog(catalog_spec(None, warehouse, "test"), "test")
    catalog.create_namespace("db")
    catalog.create_table("db.out", schema=wrong)
    sink = IcebergSink("db.out", warehouse=warehouse, schema=OUT, mode="append")
    with pytest.raises(SinkOutputError, match=r"column 'k' is int64, the table's is string"):
        bounded_job(spark, str(tmp_path), sink)
    assert not (tmp_path / "chk").exists() or not list((tmp_path / "chk").rglob("chk-*"))
