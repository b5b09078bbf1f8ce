"""q0 (pass-through), q1 (currency conversion), q2 (selection), q14 (calculation): one
pass over the bids, no state."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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

EURO_PER_DOLLAR = 0.908
"""Nexmark's fixed dollar-to-euro rate (q1, q14)."""


def _in_euros(batch: pa.RecordBatch) -> pa.Array:
    return pc.multiply(batch.column("price").cast(pa.float64()), EURO_PER_DOLLAR)


def q1_batch(inputs: dict[str, DataStream]) -> DataStream:
    def to_euro(batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = [_in_euros(batch) if c == "price" else batch.column(c) for c in BID_COLUMNS]
        return pa.RecordBatch.from_arrays(columns, names=list(BID_COLUMNS))

    return inputs["bid"].map_batch(to_euro, name="q1")


def q1_per_record(inputs: dict[str, DataStream]) -> DataStream:
    def to_euro(row: Row) -> Row:
        return {c: row[c] for c in BID_COLUMNS} | {"price": EURO_PER_DOLLAR * row["price"]}

    return inputs["bid"].map(to_euro, name="q1")


Q1 = Query(
    name="q1",
    title="currency conversion",
    inputs=("bid",),
    batch=q1_batch,
    per_record=q1_per_record,
    reference_sql=(
        "SELECT auction, bidder, CAST(0.908 * price AS DOUBLE) AS price, date_time, extra FROM bid"
    ),
    columns=BID_COLUMNS,
    float_digits=3,
)

SELECTED_AUCTIONS = 123
"""q2 keeps the bids on auctions whose id is a multiple of this."""


def q2_batch(inputs: dict[str, DataStream]) -> DataStream:
    def selected(batch: pa.RecordBatch) -> pa.Array:
        return pa.array(batch.column("auction").to_numpy() % SELECTED_AUCTIONS == 0)

    bids = inputs["bid"].filter_batch(selected, name="q2")
    return bids.map_batch(lambda b: b.select(["auction", "price"]), name="q2-columns")


def q2_per_record(inputs: dict[str, DataStream]) -> DataStream:
    bids = inputs["bid"].filter(lambda row: row["auction"] % SELECTED_AUCTIONS == 0, name="q2")
    return bids.map(lambda row: {"auction": row["auction"], "price": row["price"]}, name="q2-row")


Q2 = Query(
    name="q2",
    latency_column=None,
    title="selection",
    inputs=("bid",),
    batch=q2_batch,
    per_record=q2_per_record,
    reference_sql="SELECT auction, price FROM bid WHERE auction % 123 = 0",
    columns=("auction", "price"),
)

Q14_COLUMNS = ("auction", "bidder", "price", "bid_time_type", "date_time", "extra", "c_counts")
LOW_EUROS, HIGH_EUROS = 1_000_000, 50_000_000
"""q14 keeps bids whose price in euros is strictly between these."""


def bid_time_type(hour: int) -> str:
    """Nexmark q14's part of the day: 8..18 h day, up to 6 h or from 20 h night."""
    if 8 <= hour <= 18:
        return "dayTime"
    return "nightTime" if hour <= 6 or hour >= 20 else "otherTime"


def q14_batch(inputs: dict[str, DataStream]) -> DataStream:
    def in_range(batch: pa.RecordBatch) -> pa.Array:
        euros = _in_euros(batch)
        return pc.and_(pc.greater(euros, LOW_EUROS), pc.less(euros, HIGH_EUROS))

    def calculate(batch: pa.RecordBatch) -> pa.RecordBatch:
        hour = pc.hour(batch.column("date_time")).to_numpy()
        kind = np.where(
            (hour >= 8) & (hour <= 18),
            "dayTime",
            np.where((hour <= 6) | (hour >= 20), "nightTime", "otherTime"),
        )
        columns = {
            "auction": batch.column("auction"),
            "bidder": batch.column("bidder"),
            "price": _in_euros(batch),
            "bid_time_type": pa.array(kind, pa.string()),
            "date_time": batch.column("date_time"),
            "extra": batch.column("extra"),
            "c_counts": pc.count_substring(batch.column("extra"), "c").cast(pa.int64()),
        }
        return pa.RecordBatch.from_pydict(columns)

    bids = inputs["bid"].filter_batch(in_range, name="q14")
    return bids.map_batch(calculate, name="q14-calculate")


def q14_per_record(inputs: dict[str, DataStream]) -> DataStream:
    def calculate(row: Row) -> Row:
        return {
            "auction": row["auction"],
            "bidder": row["bidder"],
            "price": EURO_PER_DOLLAR * row["price"],
            "bid_time_type": bid_time_type(row["date_time"].hour),
            "date_time": row["date_time"],
            "extra": row["extra"],
            "c_counts": row["extra"].count("c"),
        }

    bids = inputs["bid"].filter(
        lambda row: LOW_EUROS < EURO_PER_DOLLAR * row["price"] < HIGH_EUROS, name="q14"
    )
    return bids.map(calculate, name="q14-calculate")


Q14 = Query(
    name="q14",
    title="calculation",
    inputs=("bid",),
    batch=q14_batch,
    per_record=q14_per_record,
    reference_sql="""
        SELECT auction, bidder, CAST(0.908 * price AS DOUBLE) AS price,
            CASE
                WHEN hour(date_time) BETWEEN 8 AND 18 THEN 'dayTime'
                WHEN hour(date_time) <= 6 OR hour(date_time) >= 20 THEN 'nightTime'
                ELSE 'otherTime'
            END AS bid_time_type,
            date_time, extra,
            length(extra) - length(replace(extra, 'c', '')) AS c_counts
        FROM bid
        WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
    """,
    columns=Q14_COLUMNS,
    float_digits=3,
)

STATELESS = [Q0, Q1, Q2, Q14]
