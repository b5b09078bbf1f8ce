"""DeltaSink and the delta source on Spark: the scenarios every exactly-once sink passes
(tests/spark/sink_scenarios.py), and table-to-table reading, read back with deltalake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from sink_scenarios import (
    bounded_job,
    check_exactly_once,
    stop_resume_at_another_parallelism_and_drain,
)

from flintlock.sinks.delta import DeltaSink

pytestmark = pytest.mark.slow


def rows_of(uri: str) -> list[dict[str, Any]]:
    """The table's rows, read by deltalake."""
    return DeltaTable(uri).to_pyarrow_table().to_pylist()


def test_a_bounded_job_writes_every_row_once(spark: Any, tmp_path: Path) -> None:
    uri = f"{tmp_path}/table"
    bounded_job(spark, str(tmp_path), DeltaSink(uri, partition_by=["k"]), rows=1000)
    check_exactly_once(rows_of(uri), 1000, drained=True)
    assert DeltaTable(uri).version() == 0  # one commit: the final checkpoint's


def test_stop_resume_at_another_parallelism_and_drain(spark: Any, tmp_path: Path) -> None:
    uri = f"{tmp_path}/table"
    stop_resume_at_another_parallelism_and_drain(
        spark, str(tmp_path), lambda: DeltaSink(uri, mode="append"), lambda: rows_of(uri)
    )
    table = DeltaTable(uri)
    versions = [c.get("flintlock.checkpoint_id") for c in table.history()]
    assert len(versions) == len(set(versions)) == table.version() + 1  # one per checkpoint
