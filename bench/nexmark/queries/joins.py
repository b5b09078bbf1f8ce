"""q3 (local item suggestion), q8 (monitor new users), q13 (bounded side input join) and
q20 (expanded bid): Nexmark's joins."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv

from flintlock import (
    DataStream,
    KeyedBatchProcessFunction,
    KeyedProcessFunction,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
)

from ..model import AUCTION_SCHEMA, BID_SCHEMA, PERSON_SCHEMA, TIMESTAMP
from .base import Query
from .regular_join import KEY, RegularJoinPerRecord, regular_join

Row = dict[str, Any]


def _schema_of(schema: pa.Schema, columns: dict[str, str]) -> pa.Schema:
    """The schema of ``_project(batch, columns)`` for a batch of ``schema``."""
    return pa.schema([schema.field(c).with_name(o) for o, c in columns.items()])


def _project(batch: pa.RecordBatch, columns: dict[str, str]) -> pa.RecordBatch:
    """``{output: input}`` columns of ``batch``."""
    return pa.RecordBatch.from_arrays([batch.column(c) for c in columns.values()], list(columns))


# ---- q3: persons in OR, ID or CA selling in category 10 (a regular join) ----

Q3_STATES = ("OR", "ID", "CA")
Q3_SCHEMA = pa.schema(
    [("name", pa.string()), ("city", pa.string()), ("state", pa.string()), ("id", pa.int64())]
)
Q3_PERSON = {KEY: "id", "name": "name", "city": "city", "state": "state"}
Q3_AUCTION = {KEY: "seller", "id": "id"}


def _q3_sellers(person: DataStream) -> DataStream:
    return person.filter_batch(lambda b: pc.is_in(b.column("state"), pa.array(Q3_STATES)))


def _q3_auctions(auction: DataStream) -> DataStream:
    return auction.filter_batch(lambda b: pc.equal(b.column("category"), 10))


def q3_batch(inputs: dict[str, DataStream]) -> DataStream:
    sellers = _q3_sellers(inputs["person"]).map_batch(
        lambda b: _project(b, Q3_PERSON),
        output_schema=_schema_of(PERSON_SCHEMA, Q3_PERSON),
    )
    auctions = _q3_auctions(inputs["auction"]).map_batch(
        lambda b: _project(b, Q3_AUCTION),
        output_schema=_schema_of(AUCTION_SCHEMA, Q3_AUCTION),
    )
    return regular_join(sellers, auctions, Q3_SCHEMA.names, Q3_SCHEMA)


def _q3_row(person: Row, auction: Row) -> Row:
    return {"name": person["name"], "city": person["city"], "state": person["state"]} | {
        "id": auction["id"]
    }


def q3_per_record(inputs: dict[str, DataStream]) -> DataStream:
    sellers = _q3_sellers(inputs["person"]).key_by("id")
    auctions = _q3_auctions(inputs["auction"]).key_by("seller")
    join = RegularJoinPerRecord(_q3_row)
    return sellers.connect(auctions).process(join, name="q3", output_schema=Q3_SCHEMA)


Q3 = Query(
    name="q3",
    latency_column=None,
    title="local item suggestion",
    inputs=("person", "auction"),
    batch=q3_batch,
    per_record=q3_per_record,
    reference_sql="""
        SELECT P.name, P.city, P.state, A.id
        FROM auction A JOIN person P ON A.seller = P.id
        WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    columns=tuple(Q3_SCHEMA.names),
)


# ---- q8: persons who opened an auction in the 10 s window they registered in ----

Q8_WINDOW_MS = 10_000
Q8_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("starttime", TIMESTAMP)])
Q8_PAIR = pa.schema([("id", pa.int64()), ("name", pa.string()), ("date_time", TIMESTAMP)])


def _q8_pairs(inputs: dict[str, DataStream]) -> DataStream:
    """A row per (person, auction of theirs) in the same window: the window join."""
    return (
        inputs["person"]
        .join(inputs["auction"])
        .where("id")
        .equal_to("seller")
        .window(TumblingEventTimeWindows.of(Q8_WINDOW_MS))
        .apply(
            lambda p, a: {"id": p["id"], "name": p["name"], "date_time": p["date_time"]},
            name="q8-join",
            output_schema=Q8_PAIR,
        )
    )


def _q8_window(batch: pa.RecordBatch) -> pa.RecordBatch:
    start = pc.floor_temporal(batch.column("date_time"), Q8_WINDOW_MS, "millisecond")
    return pa.RecordBatch.from_arrays(
        [batch.column("id"), batch.column("name"), start], schema=Q8_SCHEMA
    )


class FirstPerWindow(KeyedBatchProcessFunction):
    """A person's (id, name, window) once, however many auctions they opened in it: the
    state is the latest window start emitted per person, so it stays one value each."""

    output_schema = Q8_SCHEMA

    def open(self) -> None:
        self.last = self.runtime_context.get_state(
            ValueStateDescriptor("last", arrow_type=TIMESTAMP)
        )

    def process_batch(
        self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any
    ) -> pa.RecordBatch | None:
        rows = pa.table(batch).group_by(Q8_SCHEMA.names, use_threads=False).aggregate([])
        rows = rows.select(Q8_SCHEMA.names).sort_by(
            [("id", "ascending"), ("starttime", "ascending")]
        )
        last = self.last.values(rows.column("id"))
        new = pc.or_kleene(pc.is_null(last), pc.greater(rows.column("starttime"), last))
        fresh = rows.filter(pc.fill_null(new, True))
        self.last.update_values(fresh.column("id"), fresh.column("starttime"))
        return fresh.combine_chunks().to_batches()[0] if fresh.num_rows else None


def q8_batch(inputs: dict[str, DataStream]) -> DataStream:
    windows = _q8_pairs(inputs).map_batch(_q8_window, output_schema=Q8_SCHEMA)
    return windows.key_by("id").process_batch(FirstPerWindow(), name="q8")


class FirstPerWindowPerRecord(KeyedProcessFunction):
    """FirstPerWindow, a row at a time."""

    def open(self) -> None:
        self.last = self.runtime_context.get_state(ValueStateDescriptor("last"))

    def process_element(self, value: Row, ctx: Any, out: Any) -> None:
        if self.last.value() is None or value["starttime"] > self.last.value():
            self.last.update(value["starttime"])
            out.collect(value)


def q8_per_record(inputs: dict[str, DataStream]) -> DataStream:
    windows = _q8_pairs(inputs).map_batch(_q8_window, output_schema=Q8_SCHEMA)
    return windows.key_by("id").process(
        FirstPerWindowPerRecord(), name="q8", output_schema=Q8_SCHEMA
    )


Q8 = Query(
    name="q8",
    latency_column=None,
    title="monitor new users",
    inputs=("person", "auction"),
    batch=q8_batch,
    per_record=q8_per_record,
    reference_sql="""
        SELECT DISTINCT P.id, P.name, time_bucket(INTERVAL 10 SECOND, P.date_time) AS starttime
        FROM person P JOIN auction A
          ON P.id = A.seller
         AND time_bucket(INTERVAL 10 SECOND, P.date_time)
           = time_bucket(INTERVAL 10 SECOND, A.date_time)""",
    columns=tuple(Q8_SCHEMA.names),
)


# ---- q13: bids joined with a side table read from a CSV file ----

SIDE_INPUT = Path(tempfile.gettempdir()) / "nexmark-q13-side-input.csv"
"""The side table (key: auction % 10,000 -> value); keys that are multiples of 7 are
missing, so the inner join drops some bids."""
SIDE_KEYS = 10_000
Q13_SCHEMA = pa.schema(
    [
        ("auction", pa.int64()),
        ("bidder", pa.int64()),
        ("price", pa.int64()),
        ("date_time", TIMESTAMP),
        ("value", pa.string()),
    ]
)


def write_side_input(path: Path = SIDE_INPUT) -> Path:
    """Write the side table as CSV (key, value): the same file every time, replaced whole
    (a job reading it while another job writes it sees the old file or the new one)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["key", "value"])
        writer.writerows([k, f"side-{k * 37 % 1000}"] for k in range(SIDE_KEYS) if k % 7)
    os.replace(temporary, path)
    return path


def _side_values(path: Path) -> pa.Array:
    """The side table as an array indexed by key (null where the key is missing)."""
    table = pv.read_csv(path)
    values = [None] * SIDE_KEYS
    for key, value in zip(
        table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True
    ):
        values[key] = value
    return pa.array(values, pa.string())


class SideJoin:
    """Looks each bid's auction % 10,000 up in the side file, read once per subtask (a
    processing-time lookup, as Flink's: the file does not change during the job)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._values: pa.Array | None = None

    def values(self) -> pa.Array:
        if self._values is None:
            self._values = _side_values(self.path)
        return self._values

    def _lookup(self, bids: pa.RecordBatch) -> pa.Array:
        return self.values().take(pa.array(bids.column("auction").to_numpy() % SIDE_KEYS))

    def matches(self, bids: pa.RecordBatch) -> pa.Array:
        """Which bids have a row in the side table (an inner join drops the others)."""
        return self._lookup(bids).is_valid()

    def batch(self, bids: pa.RecordBatch) -> pa.RecordBatch:
        """Bids that ``matches`` kept, with their side value."""
        columns = [bids.column(c) for c in Q13_SCHEMA.names[:-1]] + [self._lookup(bids)]
        return pa.RecordBatch.from_arrays(columns, schema=Q13_SCHEMA)

    def row(self, bid: Row) -> list[Row]:
        value = self.values()[bid["auction"] % SIDE_KEYS].as_py()
        if value is None:
            return []
        return [{c: bid[c] for c in Q13_SCHEMA.names[:-1]} | {"value": value}]


def q13_batch(inputs: dict[str, DataStream]) -> DataStream:
    join = SideJoin(write_side_input())
    matched = inputs["bid"].filter_batch(join.matches)
    return matched.map_batch(join.batch, name="q13", output_schema=Q13_SCHEMA)


def q13_per_record(inputs: dict[str, DataStream]) -> DataStream:
    join = SideJoin(write_side_input())
    return inputs["bid"].flat_map(join.row, name="q13", output_schema=Q13_SCHEMA)


Q13 = Query(
    name="q13",
    title="bounded side input join",
    inputs=("bid",),
    batch=q13_batch,
    per_record=q13_per_record,
    reference_sql=f"""
        SELECT B.auction, B.bidder, B.price, B.date_time, S.value
        FROM bid B JOIN read_csv('{SIDE_INPUT}', header = true,
                                 columns = {{'key': 'BIGINT', 'value': 'VARCHAR'}}) S
          ON B.auction % {SIDE_KEYS} = S.key""",
    columns=tuple(Q13_SCHEMA.names),
)


# ---- q20: bids with their auction, category 10 (a regular join) ----

Q20_BID = {
    KEY: "auction",
    "auction": "auction",
    "bidder": "bidder",
    "price": "price",
    "channel": "channel",
    "url": "url",
    "bid_date_time": "date_time",
    "bid_extra": "extra",
}
Q20_AUCTION = {
    KEY: "id",
    "item_name": "item_name",
    "description": "description",
    "initial_bid": "initial_bid",
    "reserve": "reserve",
    "auction_date_time": "date_time",
    "expires": "expires",
    "seller": "seller",
    "category": "category",
    "auction_extra": "extra",
}
Q20_SCHEMA = pa.schema(
    [BID_SCHEMA.field(c).with_name(o) for o, c in list(Q20_BID.items())[1:]]
    + [AUCTION_SCHEMA.field(c).with_name(o) for o, c in list(Q20_AUCTION.items())[1:]]
)


def q20_batch(inputs: dict[str, DataStream]) -> DataStream:
    auctions = _q3_auctions(inputs["auction"]).map_batch(
        lambda b: _project(b, Q20_AUCTION), output_schema=_schema_of(AUCTION_SCHEMA, Q20_AUCTION)
    )
    bids = inputs["bid"].map_batch(
        lambda b: _project(b, Q20_BID), output_schema=_schema_of(BID_SCHEMA, Q20_BID)
    )
    return regular_join(auctions, bids, Q20_SCHEMA.names, Q20_SCHEMA)


def _q20_row(auction: Row, bid: Row) -> Row:
    row = {o: bid[c] for o, c in list(Q20_BID.items())[1:]}
    return row | {o: auction[c] for o, c in list(Q20_AUCTION.items())[1:]}


def q20_per_record(inputs: dict[str, DataStream]) -> DataStream:
    auctions = _q3_auctions(inputs["auction"]).key_by("id")
    join = RegularJoinPerRecord(_q20_row)
    return auctions.connect(inputs["bid"].key_by("auction")).process(
        join, name="q20", output_schema=Q20_SCHEMA
    )


Q20 = Query(
    name="q20",
    latency_column="bid_date_time",
    title="expanded bid",
    inputs=("auction", "bid"),
    batch=q20_batch,
    per_record=q20_per_record,
    reference_sql="""
        SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time AS bid_date_time,
               B.extra AS bid_extra, A.item_name, A.description, A.initial_bid, A.reserve,
               A.date_time AS auction_date_time, A.expires, A.seller, A.category,
               A.extra AS auction_extra
        FROM bid B JOIN auction A ON B.auction = A.id
        WHERE A.category = 10""",
    columns=tuple(Q20_SCHEMA.names),
)

JOINS = [Q3, Q8, Q13, Q20]
