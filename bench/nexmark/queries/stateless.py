"""q0 (pass-through), q1 (currency conversion), q2 (selection), q14 (calculation): one
pass over the bids, no state."""

from __future__ import annotations

from flintlock import DataStream

from .base import Query

Row = dict[str, object]

BID_COLUMNS = ("auction", "bidder", "price", "date_time", "extra")


def q0_batch(inputs: dict[str, DataStream]) -> DataStream:
    return inputs["bid"].map_batch(lambda b: b.select(list(BID_COLUMNS)), name="q0")


def q0_per_record(inputs: dict[str, DataStream]) -> DataStream:
    return inputs["bid"].map(lambda row: {c: row[c] for c in BID_COLUMNS}, name="q0")


Q0 = Query(
    name="q0",
    title="pass-through",
    inputs=("bid",),
    batch=q0_batch,
    per_record=q0_per_record,
    reference_sql="SELECT auction, bidder, price, date_time, extra FROM bid",
    columns=BID_COLUMNS,
)

STATELESS = [Q0]
