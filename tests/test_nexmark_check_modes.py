"""The Nexmark check's comparisons that no Spark job needs: floats rounded to the query's
digits, and a non-exact query's rows summed per key ("totals")."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from nexmark.check import differences
from nexmark.queries import Query


def _query(**fields: object) -> Query:
    return Query(
        name="q",
        title="test",
        inputs=("bid",),
        batch=lambda s: s["bid"],
        reference_sql="",
        **fields,  # type: ignore[arg-type]
    )


def test_floats_equal_to_the_digits_asked_are_equal() -> None:
    """0.908 * 3331 in floats is 3024.5480000000002, which Arrow's round leaves as it is."""
    query = _query(columns=("price",), float_digits=3)
    output = pa.table({"price": [0.908 * 3331, 1.5]})
    assert output.column("price")[0].as_py() != 3024.548
    assert differences(query, output, pa.table({"price": [3024.548, 1.5]})) == []
    assert differences(query, output, pa.table({"price": [3024.549, 1.5]})) != []


def test_totals_sum_each_keys_rows() -> None:
    query = _query(columns=("bidder", "bid_count"), check="totals", key=("bidder",))
    windows = pa.table({"bidder": [1, 2, 1, 1], "bid_count": [3, 5, 2, 1]})
    assert differences(query, windows, pa.table({"bidder": [2, 1], "bid_count": [5, 6]})) == []
    wrong = differences(query, windows, pa.table({"bidder": [1, 2], "bid_count": [5, 5]}))
    assert wrong[0].startswith("q: 2 rows, the reference has 2; 1 missing, 1 not in")
