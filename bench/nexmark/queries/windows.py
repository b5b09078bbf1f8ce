"""q5 (hot items), q7 (highest bid), q11 (user sessions), q12 (processing-time windows):
window aggregates over the bids.

Window bounds are in the output as epoch milliseconds (``starttime``, ``endtime``). A
window's result carries its window's last millisecond as its event time (``date_time``),
as Flink's window results do, so a later window or window join groups the results of
one window together and closes once they have all come."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock import (
    AggregateFunction,
    DataStream,
    EventTimeSessionWindows,
    KeyedBatchProcessFunction,
    ListStateDescriptor,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)

from ..model import BID_SCHEMA
from .base import Query

Row = dict[str, Any]

HOT_WINDOW_MS, HOT_SLIDE_MS = 10_000, 2_000
"""q5's sliding windows: 10 s, one starting every 2 s."""
HIGHEST_WINDOW_MS = 10_000
"""q7's tumbling windows."""
SESSION_GAP_MS = 10_000
"""q11: a bidder's session ends after this long without a bid."""
PROCESSING_WINDOW_MS = 10_000
"""q12's tumbling windows of processing time."""


def _millis(timestamps: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(timestamps.cast(pa.int64()).to_numpy(zero_copy_only=False))


def _as_time(millis: np.ndarray) -> pa.Array:
    return pa.array(millis, pa.int64()).cast(pa.timestamp("ms"))


def _window_rows(batch: pa.RecordBatch, kept: dict[str, str]) -> pa.RecordBatch:
    """An ``aggregate_columns`` result as ``kept`` (output name: its column) with the
    window as ``starttime``, ``endtime`` and event time ``date_time`` = end - 1 ms."""
    ends = batch.column("window_end").to_numpy(zero_copy_only=False)
    columns = {name: batch.column(column) for name, column in kept.items()}
    columns |= {
        "starttime": batch.column("window_start"),
        "endtime": batch.column("window_end"),
        "date_time": _as_time(ends - 1),
    }
    return pa.RecordBatch.from_pydict(columns)


def _window_row(window: Any) -> Row:
    """A per-record window result's bounds and event time (its last millisecond)."""
    end = int(window.end)
    return {
        "starttime": int(window.start),
        "endtime": end,
        "date_time": np.datetime64(end - 1, "ms").astype(object),
    }


class CountRows(AggregateFunction):
    """How many rows a window holds."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Row, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, a: int, b: int) -> int:
        return a + b


class CountPerKey(ProcessWindowFunction):
    """A window's count as a row: ``key_name``, ``count_name`` and the window."""

    def __init__(self, key_name: str, count_name: str) -> None:
        self.key_name, self.count_name = key_name, count_name

    def process(self, key: Any, context: Any, elements: list[Any], out: Any) -> None:
        row = {self.key_name: key, self.count_name: elements[0]}
        out.collect(row | _window_row(context.window))


# ---- q5: hot items ----

Q5_COLUMNS = ("auction", "num", "starttime", "endtime")


def _hot_window_counts_batch(bids: DataStream) -> DataStream:
    counts = (
        bids.key_by("auction")
        .window(SlidingEventTimeWindows.of(HOT_WINDOW_MS, HOT_SLIDE_MS))
        .aggregate_columns(
            {"num": ("auction", "count"), "date_time": ("date_time", "max")}, name="q5-counts"
        )
    )
    return counts.map_batch(
        lambda b: _window_rows(b, {"auction": "auction", "num": "num"}), name="q5-count-rows"
    )


def q5_batch(inputs: dict[str, DataStream]) -> DataStream:
    counts = _hot_window_counts_batch(inputs["bid"])
    most = (
        counts.key_by("endtime")
        .window(TumblingEventTimeWindows.of(HOT_SLIDE_MS))
        .aggregate_columns(
            {"most": ("num", "max"), "date_time": ("date_time", "max")}, name="q5-most"
        )
    )
    return (
        counts.join(most)
        .where(["endtime", "num"])
        .equal_to(["endtime", "most"])
        .window(TumblingEventTimeWindows.of(HOT_SLIDE_MS))
        .apply(lambda count, _: {c: count[c] for c in Q5_COLUMNS}, name="q5")
    )


class HottestAuctions(ProcessWindowFunction):
    """Of one sliding window's counts per auction, those with the most bids (ties kept)."""

    def process(self, key: Any, context: Any, elements: list[Row], out: Any) -> None:
        most = max(row["num"] for row in elements)
        for row in elements:
            if row["num"] == most:
                out.collect({c: row[c] for c in Q5_COLUMNS})


def q5_per_record(inputs: dict[str, DataStream]) -> DataStream:
    counts = (
        inputs["bid"]
        .key_by("auction")
        .window(SlidingEventTimeWindows.of(HOT_WINDOW_MS, HOT_SLIDE_MS))
        .aggregate(CountRows(), CountPerKey("auction", "num"), name="q5-counts")
    )
    return (
        counts.key_by("endtime")
        .window(TumblingEventTimeWindows.of(HOT_SLIDE_MS))
        .process(HottestAuctions(), name="q5")
    )


Q5 = Query(
    name="q5",
    latency_column="endtime",
    title="hot items",
    inputs=("bid",),
    batch=q5_batch,
    per_record=q5_per_record,
    reference_sql=f"""
        WITH windows AS (
            SELECT auction,
                (epoch_ms(date_time::TIMESTAMP) // {HOT_SLIDE_MS} - k) * {HOT_SLIDE_MS}
                    AS starttime
            FROM bid, range({HOT_WINDOW_MS // HOT_SLIDE_MS}) AS copies(k)
        ),
        counts AS (
            SELECT auction, starttime, count(*) AS num FROM windows GROUP BY auction, starttime
        ),
        most AS (SELECT starttime, max(num) AS most FROM counts GROUP BY starttime)
        SELECT auction, num, starttime, starttime + {HOT_WINDOW_MS} AS endtime
        FROM counts JOIN most USING (starttime) WHERE num = most
    """,
    columns=Q5_COLUMNS,
)


# ---- q7: highest bid ----

Q7_COLUMNS = ("auction", "bidder", "price", "date_time", "extra")


def _with_window_end(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The bid with ``endtime``: the end of its q7 window, in epoch milliseconds."""
    stamps = _millis(batch.column("date_time"))
    ends = stamps // HIGHEST_WINDOW_MS * HIGHEST_WINDOW_MS + HIGHEST_WINDOW_MS
    return batch.append_column("endtime", pa.array(ends, pa.int64()))


# Flink's q7 joins each window's highest price with the bids from its start to its end
# inclusive; here a bid is in its one window only, [start, end), as the window says.


def q7_batch(inputs: dict[str, DataStream]) -> DataStream:
    bids = inputs["bid"].map_batch(_with_window_end, name="q7-window")
    return bids.key_by("endtime").process_batch(HighestBidsPerWindow(), name="q7")


class HighestBidsPerWindow(KeyedBatchProcessFunction):
    """Keyed by window end: each window's bids wait in list state (appended a batch at a
    time), and when the watermark passes the window's last millisecond its bids at the
    highest price are emitted (ties kept). A bid whose window has fired is late: dropped,
    as a window drops it."""

    output_schema = pa.schema([BID_SCHEMA.field(c) for c in Q7_COLUMNS])

    def open(self) -> None:
        held = ListStateDescriptor("bids", arrow_type=pa.struct(list(self.output_schema)))
        self.bids = self.runtime_context.get_list_state(held)

    def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> None:
        on_time = pc.greater(pc.subtract(keys, 1), ctx.current_watermark())
        if not pc.all(on_time).as_py():
            batch, keys = batch.filter(on_time), keys.filter(on_time)
        rows = pa.StructArray.from_arrays([batch.column(c) for c in Q7_COLUMNS], Q7_COLUMNS)
        self.bids.add_values(keys, rows)
        ends = pc.unique(keys)
        ctx.register_event_time_timers(ends, pc.subtract(ends, 1))

    def on_timers(self, timestamps: pa.Array, keys: pa.Array, ctx: Any) -> pa.RecordBatch:
        held = self.bids.values(keys)
        self.bids.clear_values(keys)
        bids = pa.RecordBatch.from_struct_array(held.flatten())
        prices = bids.column("price").to_numpy()
        offsets = held.offsets.to_numpy()
        starts = offsets[:-1] - offsets[0]  # every fired window holds a bid
        highest = np.maximum.reduceat(prices, starts)
        lengths = pc.list_value_length(held).to_numpy()
        return bids.filter(pa.array(prices == np.repeat(highest, lengths)))


class HighestBids(ProcessWindowFunction):
    """Of one window's bids, those at its highest price (ties kept)."""

    def process(self, key: Any, context: Any, elements: list[Row], out: Any) -> None:
        highest = max(row["price"] for row in elements)
        for row in elements:
            if row["price"] == highest:
                out.collect({c: row[c] for c in Q7_COLUMNS})


def q7_per_record(inputs: dict[str, DataStream]) -> DataStream:
    bids = inputs["bid"].map_batch(_with_window_end, name="q7-window")
    return (
        bids.key_by("endtime")
        .window(TumblingEventTimeWindows.of(HIGHEST_WINDOW_MS))
        .process(HighestBids(), name="q7")
    )


Q7 = Query(
    name="q7",
    latency_column=None,
    title="highest bid",
    inputs=("bid",),
    batch=q7_batch,
    per_record=q7_per_record,
    reference_sql=f"""
        WITH windowed AS (
            SELECT *, epoch_ms(date_time::TIMESTAMP) // {HIGHEST_WINDOW_MS} AS bid_window FROM bid
        ),
        highest AS (SELECT bid_window, max(price) AS price FROM windowed GROUP BY bid_window)
        SELECT auction, bidder, price, date_time, extra
        FROM windowed JOIN highest USING (bid_window, price)
    """,
    columns=Q7_COLUMNS,
)


# ---- q11: user sessions ----

Q11_COLUMNS = ("bidder", "bid_count", "starttime", "endtime")


def q11_batch(inputs: dict[str, DataStream]) -> DataStream:
    sessions = (
        inputs["bid"]
        .key_by("bidder")
        .window(EventTimeSessionWindows.with_gap(SESSION_GAP_MS))
        .aggregate_columns({"bid_count": ("bidder", "count")}, name="q11-sessions")
    )
    return sessions.map_batch(
        lambda b: _window_rows(b, {"bidder": "bidder", "bid_count": "bid_count"}), name="q11"
    )


def q11_per_record(inputs: dict[str, DataStream]) -> DataStream:
    return (
        inputs["bid"]
        .key_by("bidder")
        .window(EventTimeSessionWindows.with_gap(SESSION_GAP_MS))
        .aggregate(CountRows(), CountPerKey("bidder", "bid_count"), name="q11")
    )


Q11 = Query(
    name="q11",
    title="user sessions",
    inputs=("bid",),
    batch=q11_batch,
    per_record=q11_per_record,
    reference_sql=f"""
        WITH stamped AS (SELECT bidder, epoch_ms(date_time::TIMESTAMP) AS t FROM bid),
        starts AS (
            SELECT bidder, t,
                CASE WHEN t - lag(t) OVER (PARTITION BY bidder ORDER BY t) < {SESSION_GAP_MS}
                    THEN 0 ELSE 1 END AS starts_session
            FROM stamped
        ),
        sessions AS (
            -- ties: the bid that may start a session sorts first, so every bid of its time
            -- joins it (each window function orders ties on its own, in any order)
            SELECT bidder, t,
                sum(starts_session) OVER (
                    PARTITION BY bidder ORDER BY t, starts_session DESC ROWS UNBOUNDED PRECEDING
                ) AS session
            FROM starts
        )
        SELECT bidder, count(*) AS bid_count, min(t) AS starttime,
            max(t) + {SESSION_GAP_MS} AS endtime
        FROM sessions GROUP BY bidder, session
    """,
    columns=Q11_COLUMNS,
)


# ---- q12: processing-time windows ----


def _stamped_now(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The bid with ``p_time``: the wall-clock time it is seen at."""
    now = np.full(batch.num_rows, time.time_ns() // 1_000_000, dtype=np.int64)
    return batch.append_column("p_time", _as_time(now))


def q12_batch(inputs: dict[str, DataStream]) -> DataStream:
    seen = inputs["bid"].map_batch(_stamped_now, name="q12-seen")
    return (
        seen.assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps("p_time"), name="q12-time"
        )
        .key_by("bidder")
        .window(TumblingEventTimeWindows.of(PROCESSING_WINDOW_MS))
        .aggregate_columns({"bid_count": ("bidder", "count")}, name="q12")
    )


Q12 = Query(
    name="q12",
    latency_column="window_end",
    title="processing-time windows",
    inputs=("bid",),
    batch=q12_batch,
    reference_sql="SELECT bidder, count(*) AS bid_count FROM bid GROUP BY bidder",
    columns=("bidder", "bid_count"),
    check="totals",
    key=("bidder",),
)
"""The windows are of the time each bid is seen (ingestion time: the wall clock when
it is read, as event time from there on), so a bounded job's last windows close at its
end; with TumblingProcessingTimeWindows they would not (processing-time timers in the
future never fire at the end of input). Which window a bid falls in depends on the
clock: the check is that each bidder's counts add up to its bids."""

WINDOWS = [Q5, Q7, Q11, Q12]
