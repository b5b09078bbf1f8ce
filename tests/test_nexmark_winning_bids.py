"""Nexmark's winning bids (q4, q6), both forms, in the operator test harnesses: bids that
come before their auction count, a winner leaves once the watermark passes its expiry."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from nexmark.model import AUCTION_SCHEMA, BID_SCHEMA
from nexmark.queries.winning_bids import WinningBids, WinningBidsPerRecord

from flintlock.operators.process import CoProcessOperator
from flintlock.testing import MultipleInputHarness, TwoInputHarness

AUCTION_IN = pa.schema([f.with_name("auction") if f.name == "id" else f for f in AUCTION_SCHEMA])


def _auction(auction: int, start: int, expires: int) -> pa.RecordBatch:
    row = {"auction": auction, "item_name": "x", "description": "x", "initial_bid": 1}
    row |= {"reserve": 2, "date_time": start, "expires": expires, "seller": 7, "category": 10}
    return pa.RecordBatch.from_pylist([row | {"extra": ""}], schema=AUCTION_IN)


def _bids(auction: int, bids: list[tuple[int, int]]) -> pa.RecordBatch:
    rows = [
        {"auction": auction, "bidder": 1, "price": price, "channel": "c", "url": "u"}
        | {"date_time": time, "extra": ""}
        for time, price in bids
    ]
    return pa.RecordBatch.from_pylist(rows, schema=BID_SCHEMA)


def _winning_bids(form: str) -> MultipleInputHarness | TwoInputHarness:
    if form == "batch":
        return MultipleInputHarness(WinningBids())
    operator = CoProcessOperator(
        WinningBidsPerRecord(),
        key_columns=("auction", "auction"),
        timestamp_columns=("date_time", "date_time"),
    )
    return TwoInputHarness(operator)


@pytest.mark.parametrize("form", ["batch", "per_record"])
def test_a_winning_bid_counts_bids_that_came_before_their_auction(form: str) -> None:
    """Bids that reach the operator before their auction wait for it (and count if made
    within its run); a winner leaves only once the watermark passes the expiry; bids on an
    auction closed already are dropped once event time passes them."""
    harness = _winning_bids(form)
    harness.process_batch(_bids(1, [(1500, 700), (1200, 50), (900, 9999)]), 2)  # 900: too early
    harness.process_batch(_auction(1, 1000, 2000), 1)
    harness.process_batch(_bids(1, [(1800, 300), (2500, 8000)]), 2)  # 2500: too late
    for mark in (1999, 2000):
        harness.process_watermark(mark, 1)
        harness.process_watermark(mark, 2)
        if mark == 1999:
            assert harness.output().num_rows == 0
    harness.process_batch(_bids(1, [(2600, 5)]), 2)  # the auction is closed: waits, then goes
    harness.process_watermark(3000, 1)
    harness.process_watermark(3000, 2)
    winners = harness.output().to_pylist()
    assert winners == [
        {"auction": 1, "seller": 7, "category": 10, "expires_ms": 2000, "final": 700}
    ]
    harness.complete()
    assert harness.output().num_rows == 1
