"""Each auction's winning bid (q4, q6): the highest price among its bids made between its
start and its expiry, final once the watermark passes the expiry.

Auctions and bids meet in one keyed two-input operator: bids are merged into the best
price per auction batch-level (Arrow group-by), and one event-time timer per auction at
its expiry emits the winner and clears the auction's state, so state holds only auctions
in flight. A bid that comes before its auction (Nexmark's id lead, or two sources read
at different speeds) waits in state until the auction arrives, or until event time
passes the bid (an auction that comes later starts after the bid, which then does not
count; most such bids are on auctions already closed)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock import (
    CoProcessFunction,
    DataStream,
    ListStateDescriptor,
    MultipleInputStreamOperator,
    ValueStateDescriptor,
)

from ..model import AUCTION_SCHEMA

KEY = "auction"
WINNER_SCHEMA = pa.schema(
    [
        ("auction", pa.int64()),
        ("seller", pa.int64()),
        ("category", pa.int64()),
        ("expires_ms", pa.int64()),
        ("final", pa.int64()),
    ]
)
INT64S = pa.list_(pa.int64())


def _ms(column: pa.Array) -> np.ndarray:
    return column.cast(pa.int64()).to_numpy()


class WinningBids(MultipleInputStreamOperator):
    """Input 1: auctions, input 2: bids, both keyed by auction id (``auction``)."""

    key_column = KEY

    def __init__(self) -> None:
        super().__init__(2, name="winning-bids")
        self._winners: list[dict[str, Any]] = []

    def open(self) -> None:
        state = self.context.keyed_state
        # [start ms, expires ms, seller, category]
        self.auction = state(ValueStateDescriptor("auction", arrow_type=INT64S))
        self.best = state(ValueStateDescriptor("best", arrow_type=pa.int64()))
        # bids waiting for their auction: [time ms, price, time ms, price, ...]
        self.waiting = state(ValueStateDescriptor("waiting", arrow_type=INT64S))

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            (self._auctions if input_index == 1 else self._bids)(batch)

    def _auctions(self, batch: pa.RecordBatch) -> None:
        ids = batch.column(KEY).to_numpy()
        start, expires = _ms(batch.column("date_time")), _ms(batch.column("expires"))
        rows = np.stack(
            [start, expires, _ms(batch.column("seller")), _ms(batch.column("category"))], 1
        )
        self.auction.update_values(ids.tolist(), rows.tolist())
        timers = self.timer_service()
        for key, expiry in zip(ids.tolist(), expires.tolist(), strict=True):
            timers.register_event_time_timer_for(key, expiry)
        waiting = self.waiting.values(batch.column(KEY))
        have = np.flatnonzero(waiting.is_valid().to_numpy(zero_copy_only=False))
        if len(have) == 0:
            return
        keys, lists = ids[have], waiting.take(pa.array(have))
        best = self.best.values(pa.array(keys)).to_pylist()
        for i, flat in enumerate(lists.to_pylist()):
            times, prices = np.array(flat[0::2]), np.array(flat[1::2])
            valid = prices[(times >= start[have[i]]) & (times <= expires[have[i]])]
            if len(valid):
                best[i] = max(int(valid.max()), best[i] or 0)
        self.best.update_values(keys.tolist(), best)
        self.waiting.update_values(keys.tolist(), [None] * len(keys))

    def _bids(self, batch: pa.RecordBatch) -> None:
        keys = batch.column(KEY)
        found = self.auction.values(keys)
        known = found.is_valid()
        self._wait(batch.filter(pc.invert(known)))
        bids, auctions = batch.filter(known), found.filter(known)
        if bids.num_rows == 0:
            return
        bounds = auctions.flatten().to_numpy().reshape(-1, 4)
        times = _ms(bids.column("date_time"))
        inside = (times >= bounds[:, 0]) & (times <= bounds[:, 1])
        bids = bids.filter(pa.array(inside))
        if bids.num_rows == 0:
            return
        most = pa.table(bids).group_by(KEY, use_threads=False).aggregate([("price", "max")])
        best = self.best.values(most.column(KEY)).to_numpy(zero_copy_only=False)
        price = most.column("price_max").to_numpy()
        merged = np.where(np.isnan(best.astype(float)), price, np.fmax(best, price))
        self.best.update_values(most.column(KEY).to_pylist(), merged.astype(np.int64).tolist())

    def _wait(self, bids: pa.RecordBatch) -> None:
        """Append bids of auctions not seen yet to their auction's waiting list."""
        if bids.num_rows == 0:
            return
        pairs: dict[int, list[int]] = {}
        times = _ms(bids.column("date_time")).tolist()
        timers = self.timer_service()
        for key, time, price in zip(
            bids.column(KEY).to_pylist(), times, bids.column("price").to_pylist(), strict=True
        ):
            pairs.setdefault(key, []).extend((time, price))
            # once event time passes the bid, an auction still unseen starts after it
            timers.register_event_time_timer_for(key, time)
        keys = list(pairs)
        earlier = self.waiting.values(pa.array(keys, pa.int64())).to_pylist()
        merged = [(old or []) + pairs[key] for key, old in zip(keys, earlier, strict=True)]
        self.waiting.update_values(keys, merged)

    def on_event_time(self, timestamp: int, key: Any) -> None:
        auction, best = self.auction.value(), self.best.value()
        if auction is None:  # bids up to now waited for an auction that cannot count them
            flat = self.waiting.value() or []
            later = [
                v for i in range(0, len(flat), 2) if flat[i] > timestamp for v in flat[i : i + 2]
            ]
            self.waiting.update(later or None)
            return
        if timestamp < auction[1]:  # a waiting bid's timer; the auction came meanwhile
            return
        if best is not None:
            _, expires, seller, category = auction
            self._winners.append(
                {"auction": key, "seller": seller, "category": category}
                | {"expires_ms": expires, "final": best}
            )
        self.auction.clear()
        self.best.clear()
        self.waiting.clear()

    def after_timers(self) -> None:
        if self._winners:
            rows = sorted(self._winners, key=lambda r: (r["expires_ms"], r["auction"]))
            self._winners = []
            self.output.emit(pa.RecordBatch.from_pylist(rows, schema=WINNER_SCHEMA))


def winning_bids(inputs: dict[str, DataStream]) -> DataStream:
    """The winner of every auction that had a bid in time, as the watermark passes its
    expiry, in order of expiry within each subtask."""
    auctions = inputs["auction"].map_batch(
        lambda b: b.rename_columns([KEY if n == "id" else n for n in b.schema.names]),
        output_schema=pa.schema(
            [f.with_name(KEY) if f.name == "id" else f for f in AUCTION_SCHEMA]
        ),
    )
    joined = auctions.key_by(KEY).connect_many(inputs["bid"].key_by(KEY))
    return joined.transform("winning-bids", WinningBids, output_schema=WINNER_SCHEMA)


_EPOCH = datetime(1970, 1, 1)
_MS = timedelta(milliseconds=1)


def _millis(stamp: datetime) -> int:
    return (stamp - _EPOCH) // _MS


class WinningBidsPerRecord(CoProcessFunction):
    """WinningBids a record at a time: input 1 auctions keyed by id, input 2 bids keyed
    by auction; the same state and timers."""

    def open(self) -> None:
        context = self.runtime_context
        self.auction = context.get_state(ValueStateDescriptor("auction"))
        self.best = context.get_state(ValueStateDescriptor("best"))
        self.waiting = context.get_list_state(ListStateDescriptor("waiting", arrow_type=INT64S))

    def process_element1(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        start, expires = _millis(value["date_time"]), _millis(value["expires"])
        self.auction.update([start, expires, value["seller"], value["category"]])
        ctx.timer_service().register_event_time_timer(expires)
        for time, price in self.waiting.get():
            if start <= time <= expires:
                self.best.update(max(self.best.value() or 0, price))
        self.waiting.clear()

    def process_element2(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        auction, time = self.auction.value(), _millis(value["date_time"])
        if auction is None:
            self.waiting.add([time, value["price"]])
            ctx.timer_service().register_event_time_timer(time)
        elif auction[0] <= time <= auction[1]:
            self.best.update(max(self.best.value() or 0, value["price"]))

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        auction, best = self.auction.value(), self.best.value()
        if auction is None:
            self.waiting.update([w for w in self.waiting.get() if w[0] > timestamp])
            return
        if timestamp < auction[1]:
            return
        if best is not None:
            key = ctx.get_current_key()
            out.collect(
                {"auction": key, "seller": auction[2], "category": auction[3]}
                | {"expires_ms": auction[1], "final": best}
            )
        self.auction.clear()
        self.best.clear()


def winning_bids_per_record(inputs: dict[str, DataStream]) -> DataStream:
    """``winning_bids``, a record at a time."""
    auctions, bids = inputs["auction"].key_by("id"), inputs["bid"].key_by(KEY)
    return auctions.connect(bids).process(
        WinningBidsPerRecord(), name="winning-bids", output_schema=WINNER_SCHEMA
    )
