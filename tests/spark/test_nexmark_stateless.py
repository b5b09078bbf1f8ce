"""Nexmark's stateless queries (q0, q1, q2, q14) as flintlock jobs on Spark, batch-level
and per record, each output equal to DuckDB's answer on the same events."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from nexmark import ship_to_workers
from nexmark.check import differences, reference, run_collected
from nexmark.model import NexmarkConfig
from nexmark.queries import QUERIES

EVENTS = 20_000
NAMES = ["q0", "q1", "q2", "q14"]
BASE_TIME_MS = 1_767_293_999_000
"""2026-01-01T18:59:59Z: the bids span 18 h (q14's day time) and 19 h (its other time)."""


CONFIG = NexmarkConfig(seed=7, out_of_order_group=20, base_time_ms=BASE_TIME_MS)


@pytest.fixture(scope="module")
def outputs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Any]:
    """Every query of this module in both forms, in one job of 4 epochs."""
    ship_to_workers()
    folder = str(tmp_path_factory.mktemp("chk"))
    return run_collected(spark, NAMES, EVENTS, CONFIG, folder, "nexmark-stateless")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("form", ["batch", "per_record"])
def test_query_equals_duckdb(outputs: dict[str, Any], name: str, form: str) -> None:
    query = QUERIES[name]
    if (name, form) not in outputs:
        pytest.skip(f"{name} has no {form} form")
    expected = reference(query, EVENTS, CONFIG)
    assert expected.num_rows > 0
    assert differences(query, outputs[name, form], expected) == []
