"""Every Nexmark query as a flintlock job on Spark, batch-level and per record, each
output equal to DuckDB's answer on the same events (the last row per key for updating
queries, the totals per bidder for q12's processing-time windows). One job per group of
queries that share a configuration, 4 epochs each."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from nexmark import ship_to_workers
from nexmark.check import differences, reference, run_collected
from nexmark.model import NexmarkConfig
from nexmark.queries import QUERIES


@dataclass(frozen=True)
class Group:
    """Queries run in one job over the same events."""

    names: list[str]
    events: int
    config: NexmarkConfig
    min_rows: dict[str, int] = field(default_factory=dict)
    """Fewest rows a query's reference must have for its check to mean something."""


GROUPS = {
    # 20,000 events from 18:59:59Z at 10,000 per second: the bids span 18 h (q14's day
    # time) and 19 h (its other time)
    "stateless": Group(
        ["q0", "q1", "q2", "q14"],
        20_000,
        NexmarkConfig(seed=7, out_of_order_group=20, base_time_ms=1_767_293_999_000),
    ),
    # 1,000 events per second of event time: 40 s, so 10 s windows close several times,
    # a bidder's bids are sometimes more than q11's 10 s gap apart, and q8's windows close
    "windows and joins": Group(
        ["q3", "q5", "q7", "q8", "q11", "q12", "q13", "q19", "q20"],
        40_000,
        NexmarkConfig(seed=7, out_of_order_group=20, event_rate=1_000),
        {"q5": 20, "q7": 4, "q11": 100, "q12": 100, "q19": 1000},
    ),
    # 1 event per second of event time from 2025-12-31T18:00:00Z: about 11 hours over two
    # days (q15-q17's days), hundreds of auctions closing (q4, q6)
    "aggregates": Group(
        ["q4", "q6", "q15", "q16", "q17"],
        40_000,
        NexmarkConfig(seed=7, out_of_order_group=20, event_rate=1, base_time_ms=1_767_204_000_000),
    ),
}
CASES = [
    pytest.param(group, name, form, id=f"{name}-{form}")
    for group, spec in GROUPS.items()
    for name in spec.names
    for form in ("batch", "per_record")
]


@pytest.fixture(scope="module")
def outputs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The outputs of a group's job, run the first time one of its queries is checked."""
    ship_to_workers()
    runs: dict[str, dict[Any, Any]] = {}

    def of(group: str) -> dict[Any, Any]:
        if group not in runs:
            spec, folder = GROUPS[group], str(tmp_path_factory.mktemp("chk"))
            runs[group] = run_collected(spark, spec.names, spec.events, spec.config, folder)
        return runs[group]

    return of


def test_every_query_is_checked() -> None:
    names = [name for spec in GROUPS.values() for name in spec.names]
    assert sorted(names) == sorted(QUERIES) and len(names) == len(set(names))


@pytest.mark.parametrize(("group", "name", "form"), CASES)
def test_query_equals_duckdb(outputs: Any, group: str, name: str, form: str) -> None:
    query, spec = QUERIES[name], GROUPS[group]
    if form == "per_record" and query.per_record is None:
        pytest.skip(f"{name} has no per-record form")
    expected = reference(query, spec.events, spec.config)
    assert expected.num_rows >= max(spec.min_rows.get(name, 1), 1)
    assert differences(query, outputs(group)[name, form], expected) == []
