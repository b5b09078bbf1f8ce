"""q19 (auction top-10 price): per auction, its 10 highest bids, ranked.

Flink's query is an updating result (ROW_NUMBER over an unbounded stream): each form
emits an auction's ranks again whenever its top 10 changes, and the check is the last
row per (auction, rank_number) against the final top 10. Equal prices rank by earlier
``date_time``, then lower ``bidder``, then ``extra``, so the reference is deterministic."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from flintlock import (
    DataStream,
    KeyedBatchContext,
    KeyedBatchProcessFunction,
    KeyedProcessFunction,
    ListStateDescriptor,
    ValueStateDescriptor,
)

from ..model import BID_SCHEMA
from .base import Query

Row = dict[str, Any]

TOP = 10
RANKED_SCHEMA = BID_SCHEMA.append(pa.field("rank_number", pa.int64()))
TOP_BIDS = pa.list_(pa.struct(list(BID_SCHEMA)))
"""An auction's top bids, best first: the state of the per-record form (the batch form
keeps them in list state, which it replaces a batch at a time)."""
ORDER = [
    ("auction", "ascending"),
    ("price", "descending"),
    ("date_time", "ascending"),
    ("bidder", "ascending"),
    ("extra", "ascending"),
]


class TopBidsPerBatch(KeyedBatchProcessFunction):
    """Merges each batch's bids into their auctions' top 10 with one Arrow sort, and
    emits the top 10 of every auction the batch bid on."""

    output_schema = RANKED_SCHEMA

    def open(self) -> None:
        held = ListStateDescriptor("top", arrow_type=TOP_BIDS.value_type)
        self.top = self.runtime_context.get_list_state(held)

    def process_batch(
        self, batch: pa.RecordBatch, keys: pa.Array, ctx: KeyedBatchContext
    ) -> pa.RecordBatch | None:
        auctions = pa.array(np.unique(batch.column("auction").to_numpy()))
        stored = self.top.values(auctions).flatten()
        previous = pa.Table.from_batches([pa.RecordBatch.from_struct_array(stored)])
        bids = pa.Table.from_batches([batch.select(BID_SCHEMA.names)]).cast(BID_SCHEMA)
        ranked = pa.concat_tables([previous.cast(BID_SCHEMA), bids]).sort_by(ORDER)
        auction = ranked.column("auction").to_numpy()
        first = np.r_[True, auction[1:] != auction[:-1]]
        positions = np.arange(len(auction))
        rank = positions - np.maximum.accumulate(np.where(first, positions, 0)) + 1
        kept = rank <= TOP
        top = [column.combine_chunks() for column in ranked.filter(pa.array(kept)).columns]
        self.top.clear_values(auctions)
        self.top.add_values(top[0], pa.StructArray.from_arrays(top, fields=list(BID_SCHEMA)))
        ranks = pa.array(rank[kept], pa.int64())
        return pa.RecordBatch.from_arrays([*top, ranks], schema=RANKED_SCHEMA)


def q19_batch(inputs: dict[str, DataStream]) -> DataStream:
    return inputs["bid"].key_by("auction").process_batch(TopBidsPerBatch(), name="q19")


def _rank_order(row: Row) -> tuple[Any, ...]:
    return (-row["price"], row["date_time"], row["bidder"], row["extra"])


class TopBidsPerRecord(KeyedProcessFunction):
    """Inserts each bid into its auction's top 10 and emits the ranks that moved."""

    def open(self) -> None:
        self.top = self.runtime_context.get_state(ValueStateDescriptor("top", TOP_BIDS))

    def process_element(self, value: Row, ctx: Any, out: Any) -> None:
        bid = {name: value[name] for name in BID_SCHEMA.names}
        top = sorted([*(self.top.value() or []), bid], key=_rank_order)
        if len(top) > TOP and top[TOP] is bid:
            return
        top = top[:TOP]
        self.top.update(top)
        moved = next(i for i, row in enumerate(top) if row is bid)
        for rank in range(moved, len(top)):
            out.collect(top[rank] | {"rank_number": rank + 1})


def q19_per_record(inputs: dict[str, DataStream]) -> DataStream:
    return (
        inputs["bid"]
        .key_by("auction")
        .process(TopBidsPerRecord(), name="q19", output_schema=RANKED_SCHEMA)
    )


Q19 = Query(
    name="q19",
    title="auction top-10 price",
    inputs=("bid",),
    batch=q19_batch,
    per_record=q19_per_record,
    reference_sql=f"""
        SELECT * FROM (
            SELECT auction, bidder, price, channel, url, date_time, extra,
                row_number() OVER (
                    PARTITION BY auction ORDER BY price DESC, date_time, bidder, extra
                ) AS rank_number
            FROM bid
        ) WHERE rank_number <= {TOP}
    """,
    columns=tuple(RANKED_SCHEMA.names),
    check="last per key",
    key=("auction", "rank_number"),
)

TOPN = [Q19]
