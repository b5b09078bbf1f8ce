"""The Nexmark check's references are exact answers: DuckDB's SQL against plain Python on
inputs built to catch what SQL leaves open (ties in a window function's order)."""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from nexmark.queries.windows import Q11, SESSION_GAP_MS


def sessions_in_python(bidders: np.ndarray, times: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(bidder, bids, start, end) per session: a bidder's bids sorted by time, a new
    session after a gap of SESSION_GAP_MS or more, ending SESSION_GAP_MS after its last."""
    by_bidder: dict[int, list[int]] = {}
    for bidder, time in zip(bidders.tolist(), times.tolist(), strict=True):
        by_bidder.setdefault(bidder, []).append(time)
    sessions = []
    for bidder, stamps in by_bidder.items():
        stamps.sort()
        start, count = stamps[0], 1
        for previous, time in pairwise(stamps):
            if time - previous >= SESSION_GAP_MS:
                sessions.append((bidder, count, start, previous + SESSION_GAP_MS))
                start, count = time, 0
            count += 1
        sessions.append((bidder, count, start, stamps[-1] + SESSION_GAP_MS))
    return sorted(sessions)


def test_q11s_reference_puts_every_bid_of_one_time_in_one_session() -> None:
    """Many bids of one bidder share a time, and times 7 s apart make gaps of 7 s (no new
    session) and of 14 s or more (a new one): every tie lands in one session."""
    rng = np.random.default_rng(11)
    bidders = rng.integers(0, 5_000, 400_000)
    times = rng.integers(0, 300, 400_000) * 7_000
    bid = pa.table({"bidder": bidders, "date_time": pa.array(times, pa.timestamp("ms"))})
    connection = duckdb.connect()
    try:
        connection.register("bid", bid)
        connection.execute("SET TimeZone = 'UTC'")
        rows = connection.sql(Q11.reference_sql).fetchall()
    finally:
        connection.close()
    assert sorted(rows) == sessions_in_python(bidders, times)
