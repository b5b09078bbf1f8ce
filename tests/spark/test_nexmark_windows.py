"""Nexmark's window queries (q5, q7, q11, q12) and top-N (q19) as flintlock jobs on Spark,
batch-level and per record, each output equal to DuckDB's answer on the same events."""

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

EVENTS = 40_000
EVENT_RATE = 1_000
"""Events per second of event time: 40,000 events span 40 s, so the 10 s windows close
several times and a bidder's bids are sometimes more than q11's 10 s gap apart."""
NAMES = ["q5", "q7", "q11", "q12", "q19"]
MIN_ROWS = {"q5": 20, "q7": 4, "q11": 100, "q12": 100, "q19": 1000}
"""Fewest rows each reference must have for the test to mean something (several windows
and sessions at this size)."""


CONFIG = NexmarkConfig(seed=7, out_of_order_group=20, event_rate=EVENT_RATE)


@pytest.fixture(scope="module")
def outputs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Any]:
    """Every query of this module in both forms, in one job of 4 epochs."""
    ship_to_workers()
    folder = str(tmp_path_factory.mktemp("chk"))
    return run_collected(spark, NAMES, EVENTS, CONFIG, folder, "nexmark-windows")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("form", ["batch", "per_record"])
def test_query_equals_duckdb(outputs: dict[str, Any], name: str, form: str) -> None:
    query = QUERIES[name]
    if (name, form) not in outputs:
        pytest.skip(f"{name} has no {form} form")
    expected = reference(query, EVENTS, CONFIG)
    assert expected.num_rows >= MIN_ROWS[name]
    assert differences(query, outputs[name, form], expected) == []
