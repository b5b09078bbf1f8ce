"""The Nexmark generator (bench/nexmark): the same events whatever the split, Nexmark's
event mix and id spaces, event time out of order by no more than the watermark allows,
and epochs planned so that a replay or another parallelism reads the same events."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from nexmark.model import (
    AUCTION,
    BID,
    FIRST_AUCTION_ID,
    FIRST_PERSON_ID,
    PERSON,
    Generator,
    NexmarkConfig,
    count_of_kind,
    events_of_kind,
)
from nexmark.source import NexmarkSource


def events(kind: int, low: int, high: int, config: NexmarkConfig | None = None) -> pa.Table:
    generator = Generator(config or NexmarkConfig(seed=3))
    return pa.Table.from_batches([generator.batch(kind, events_of_kind(low, high, kind))])


@pytest.mark.parametrize("kind", [PERSON, AUCTION, BID])
def test_the_same_events_whatever_the_split(kind: int) -> None:
    whole = events(kind, 0, 10_000)
    parts = pa.concat_tables([events(kind, 0, 3_333), events(kind, 3_333, 10_000)])
    assert whole.equals(parts)
    assert not whole.equals(events(kind, 0, 10_000, NexmarkConfig(seed=4)))  # the seed counts


def test_the_event_mix_is_1_person_3_auctions_46_bids_in_50() -> None:
    counts = [events(kind, 0, 100_000).num_rows for kind in (PERSON, AUCTION, BID)]
    assert counts == [2_000, 6_000, 92_000]
    for kind, count in zip((PERSON, AUCTION, BID), counts, strict=True):
        assert count_of_kind(100_000, kind) == count
        assert count_of_kind(100_003, kind) == len(events_of_kind(0, 100_003, kind))


def test_ids_count_up_and_bids_name_recent_auctions_and_people() -> None:
    people = events(PERSON, 0, 50_000).column("id").to_pylist()
    auctions = events(AUCTION, 0, 50_000).column("id").to_pylist()
    assert people == list(range(FIRST_PERSON_ID, FIRST_PERSON_ID + len(people)))
    assert auctions == list(range(FIRST_AUCTION_ID, FIRST_AUCTION_ID + len(auctions)))
    bids = events(BID, 0, 50_000)
    assert pc.max(bids.column("auction")).as_py() <= auctions[-1] + 10  # the id lead
    assert pc.max(bids.column("bidder")).as_py() <= people[-1] + 10
    # half the bids go to the hot auction (an even id), the rest to any in flight
    even = (bids.column("auction").to_numpy() % 2 == 0).mean()
    assert 0.72 < even < 0.78
    cents = bids.column("price").to_numpy()
    assert cents.min() >= 100 and cents.max() <= 100_000_000


def test_auctions_expire_after_they_start_and_categories_are_10_to_14() -> None:
    table = events(AUCTION, 0, 20_000)
    starts = table.column("date_time").cast(pa.int64()).to_numpy()
    ends = table.column("expires").cast(pa.int64()).to_numpy()
    assert (ends > starts).all()
    assert set(table.column("category").to_pylist()) == {10, 11, 12, 13, 14}


def test_event_time_is_out_of_order_by_less_than_the_watermark_bound() -> None:
    config = NexmarkConfig(seed=1, event_rate=1_000, out_of_order_group=50)
    stamps = events(BID, 0, 20_000, config).column("date_time").cast(pa.int64()).to_numpy()
    lateness = np.maximum.accumulate(stamps) - stamps
    assert lateness.max() > 0  # out of order indeed
    assert lateness.max() <= config.max_out_of_orderness_ms


def test_epochs_cover_the_events_once_at_any_parallelism() -> None:
    source = NexmarkSource("bid", events=10_001, events_per_epoch=3_000)
    for parallelism in (1, 2, 3):
        state, seen, exhausted = source.initial_state(0), [], False
        while not exhausted:
            plan = source.plan_epoch(state, 0, parallelism)
            state, exhausted = plan.state, plan.exhausted
            for subtask, splits in enumerate(plan.assignments):
                reader = source.create_epoch_reader(subtask, parallelism, splits)
                seen.extend(reader.read())
        assert pa.Table.from_batches(seen).equals(events(BID, 0, 10_001, source.config))


def test_a_paced_source_plans_only_the_events_whose_time_has_come() -> None:
    config = NexmarkConfig(base_time_ms=1_000_000, event_rate=100)
    source = NexmarkSource("bid", events=1_000, config=config, paced_by_event_time=True)
    state = source.initial_state(0)
    assert source.plan_epoch(state, 999_000, 2).state["next"] == 0
    assert source.plan_epoch(state, 1_002_000, 2).state["next"] == 200  # 2 s at 100/s
