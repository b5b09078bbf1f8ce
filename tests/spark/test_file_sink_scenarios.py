"""FileSink through the scenarios every exactly-once sink passes (tests/spark/sink_scenarios.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sink_scenarios import (
    bounded_job,
    check_exactly_once,
    stop_resume_at_another_parallelism_and_drain,
)

from flintlock.sinks.files import FileSink

pytestmark = pytest.mark.slow


def test_a_bounded_job_writes_every_row_once(spark: Any, tmp_path: Path) -> None:
    bounded_job(spark, str(tmp_path), FileSink(f"{tmp_path}/out"), rows=1000)
    check_exactly_once(pq.read_table(f"{tmp_path}/out").to_pylist(), 1000, drained=True)


def test_stop_resume_at_another_parallelism_and_drain(spark: Any, tmp_path: Path) -> None:
    out = f"{tmp_path}/out"
    stop_resume_at_another_parallelism_and_drain(
        spark,
        str(tmp_path),
        lambda: FileSink(out, mode="append"),
        lambda: pq.read_table(out).to_pylist(),
    )
