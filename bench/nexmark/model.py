"""Nexmark's online auction, generated column by column: persons, auctions and bids of
any range of event numbers, identical whichever subtask or batch asks for them.

The event mix, id spaces and distributions are Nexmark's (the paper and the Beam and
Flink suites' generators): of every 50 events, 1 is a new person, 3 are new auctions and
46 are bids; bids go to one of the last 100 auctions (half of them to a "hot" one) from
one of the last 1,000 people (three quarters from a hot bidder); prices are log-uniform
from $1 to $1,000,000. Where those generators draw from ``java.util.Random`` seeded per
event, this one hashes (seed, event number, field) with splitmix64, so every column is
a few numpy operations over a whole batch and no Python object is made per event."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PERSON, AUCTION, BID = 0, 1, 2
PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
FIRST_PERSON_ID, FIRST_AUCTION_ID, FIRST_CATEGORY_ID = 1000, 1000, 10
NUM_CATEGORIES = 5
NUM_ACTIVE_PEOPLE, PERSON_ID_LEAD = 1000, 10
NUM_IN_FLIGHT_AUCTIONS, AUCTION_ID_LEAD = 100, 10
HOT_AUCTION_RATIO, HOT_SELLER_RATIO, HOT_BIDDER_RATIO, HOT_CHANNEL_RATIO = 2, 4, 4, 100
CHANNELS = 10_000
AVERAGE_BYTES = {PERSON: 200, AUCTION: 500, BID: 100}

FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah"]
FIRST_NAMES += ["Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones"]
LAST_NAMES += ["Noris"]
US_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
US_CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend"]
US_CITIES += ["Redmond", "Seattle", "Kent", "Cheyenne"]
HOT_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]

TIMESTAMP = pa.timestamp("ms")
PERSON_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("email_address", pa.string()),
        ("credit_card", pa.string()),
        ("city", pa.string()),
        ("state", pa.string()),
        ("date_time", TIMESTAMP),
        ("extra", pa.string()),
    ]
)
AUCTION_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("item_name", pa.string()),
        ("description", pa.string()),
        ("initial_bid", pa.int64()),
        ("reserve", pa.int64()),
        ("date_time", TIMESTAMP),
        ("expires", TIMESTAMP),
        ("seller", pa.int64()),
        ("category", pa.int64()),
        ("extra", pa.string()),
    ]
)
BID_SCHEMA = pa.schema(
    [
        ("auction", pa.int64()),
        ("bidder", pa.int64()),
        ("price", pa.int64()),
        ("channel", pa.string()),
        ("url", pa.string()),
        ("date_time", TIMESTAMP),
        ("extra", pa.string()),
    ]
)
SCHEMAS = {"person": PERSON_SCHEMA, "auction": AUCTION_SCHEMA, "bid": BID_SCHEMA}
KINDS = {"person": PERSON, "auction": AUCTION, "bid": BID}

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_POOL = 4096  # distinct random strings per string field


@dataclass(frozen=True)
class NexmarkConfig:
    """What the generated auction looks like: the same config and event numbers give the
    same events. ``event_rate`` is events per second of event time (Beam's default
    10,000); ``out_of_order_group`` events are shuffled in time within each group of that
    many (1: in order), so event time is out of order by less than that many events."""

    seed: int = 0
    base_time_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    event_rate: int = 10_000
    out_of_order_group: int = 1

    def __post_init__(self) -> None:
        if self.event_rate < 1:
            raise ValueError(f"event_rate must be >= 1 event per second, got {self.event_rate}")
        if self.out_of_order_group < 1:
            raise ValueError(f"out_of_order_group must be >= 1, got {self.out_of_order_group}")

    @property
    def max_out_of_orderness_ms(self) -> int:
        """How far behind the latest event time an event can be: the watermark's bound."""
        return -(-self.out_of_order_group * 1000 // self.event_rate)

    def timestamps_ms(self, events: np.ndarray) -> np.ndarray:
        """Each event's time: its number shuffled within its group, at ``event_rate``."""
        group = self.out_of_order_group
        adjusted = events
        if group > 1:
            adjusted = (events // group) * group + (events * 953) % group
        return self.base_time_ms + (adjusted * 1000) // self.event_rate


def kinds(events: np.ndarray) -> np.ndarray:
    """PERSON, AUCTION or BID for each event number."""
    offset = events % PROPORTION_DENOMINATOR
    return np.where(
        offset < PERSON_PROPORTION,
        PERSON,
        np.where(offset < PERSON_PROPORTION + AUCTION_PROPORTION, AUCTION, BID),
    )


def events_of_kind(low: int, high: int, kind: int) -> np.ndarray:
    """The event numbers in ``[low, high)`` that are of ``kind``, in order."""
    events = np.arange(low, high, dtype=np.int64)
    return events[kinds(events) == kind]


def count_of_kind(high: int, kind: int) -> int:
    """How many of the events ``[0, high)`` are of ``kind`` (without making them)."""
    epochs, offset = divmod(high, PROPORTION_DENOMINATOR)
    start, width = {
        PERSON: (0, PERSON_PROPORTION),
        AUCTION: (PERSON_PROPORTION, AUCTION_PROPORTION),
        BID: (PERSON_PROPORTION + AUCTION_PROPORTION, BID_PROPORTION),
    }[kind]
    return epochs * width + min(max(offset - start, 0), width)


class Draws:
    """Uniform draws in ``[0, 1)`` per (event, field): splitmix64 of seed, event, field."""

    def __init__(self, seed: int, events: np.ndarray) -> None:
        with np.errstate(over="ignore"):
            self._base = events.astype(np.uint64) * _GOLDEN + np.uint64(seed & (2**64 - 1))

    def uniform(self, field: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            z = self._base + np.uint64(field + 1) * np.uint64(0xD1B54A32D192ED03)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)

    def below(self, field: int, bound: np.ndarray | int) -> np.ndarray:
        """Integers in ``[0, bound)``, per event."""
        return np.floor(self.uniform(field) * bound).astype(np.int64)


def last_person(events: np.ndarray) -> np.ndarray:
    """The base-0 id of the last person created at or before each event."""
    epoch, offset = np.divmod(events, PROPORTION_DENOMINATOR)
    return epoch * PERSON_PROPORTION + np.minimum(offset, PERSON_PROPORTION - 1)


def last_auction(events: np.ndarray) -> np.ndarray:
    """The base-0 id of the last auction created at or before each event (-1: none yet)."""
    epoch, offset = np.divmod(events, PROPORTION_DENOMINATOR)
    within = np.clip(offset - PERSON_PROPORTION, -1, AUCTION_PROPORTION - 1)
    return epoch * AUCTION_PROPORTION + within


def next_person(events: np.ndarray, draws: Draws, field: int) -> np.ndarray:
    """A recently created person (or one about to be: Nexmark's id lead), base 0."""
    people = last_person(events) + 1
    active = np.minimum(people, NUM_ACTIVE_PEOPLE)
    return people - active + draws.below(field, active + PERSON_ID_LEAD)


def next_auction(events: np.ndarray, draws: Draws, field: int) -> np.ndarray:
    """One of the auctions in flight (or about to start), base 0."""
    newest = last_auction(events)
    oldest = np.maximum(newest - NUM_IN_FLIGHT_AUCTIONS, 0)
    return oldest + draws.below(field, newest - oldest + 1 + AUCTION_ID_LEAD)


def prices(draws: Draws, field: int) -> np.ndarray:
    """Log-uniform cents from 100 to 100,000,000."""
    return np.round(np.power(10.0, draws.uniform(field) * 6.0) * 100.0).astype(np.int64)


class Generator:
    """Makes the person, auction or bid columns of given event numbers as Arrow batches."""

    def __init__(self, config: NexmarkConfig) -> None:
        self.config = config
        rng = np.random.default_rng(config.seed)
        self._words = _pool(rng, 5, 5)
        self._emails = _join(self._words, "@", _pool(rng, 5, 5), ".com")
        self._cards = _pool(rng, 16, 16, alphabet="0123456789")
        self._urls = _join(
            "https://www.nexmark.com/", self._words, "/", _pool(rng, 5, 5), "/item.htm?query=1"
        )
        self._descriptions = _pool(rng, 10, 20)
        self._names = pa.array([f"{f} {s}" for f in FIRST_NAMES for s in LAST_NAMES])
        self._extras = {kind: _pool(rng, low, high) for kind, (low, high) in _EXTRA.items()}
        self._channels = pa.array(HOT_CHANNELS + [f"channel-{i}" for i in range(CHANNELS)])
        self._states, self._cities = pa.array(US_STATES), pa.array(US_CITIES)

    def batch(self, kind: int, events: np.ndarray) -> pa.RecordBatch:
        """The events (all of ``kind``) as one batch of that kind's schema."""
        draws = Draws(self.config.seed, events)
        times = self.config.timestamps_ms(events)
        make = (self._persons, self._auctions, self._bids)[kind]
        return make(events, draws, times)

    def _persons(self, events: np.ndarray, d: Draws, times: np.ndarray) -> pa.RecordBatch:
        names = self._names.take(d.below(1, len(self._names)))
        columns = [
            pa.array(last_person(events) + FIRST_PERSON_ID),
            names,
            self._emails.take(d.below(2, _POOL)),
            self._cards.take(d.below(3, _POOL)),
            self._cities.take(d.below(4, len(US_CITIES))),
            self._states.take(d.below(5, len(US_STATES))),
            _stamps(times),
            self._extras[PERSON].take(d.below(6, _POOL)),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=PERSON_SCHEMA)

    def _auctions(self, events: np.ndarray, d: Draws, times: np.ndarray) -> pa.RecordBatch:
        hot = d.below(1, HOT_SELLER_RATIO) > 0
        seller = np.where(
            hot,
            (last_person(events) // HOT_SELLER_RATIO) * HOT_SELLER_RATIO,
            next_person(events, d, 2),
        )
        initial = prices(d, 3)
        horizon = self._auction_horizon_ms(events, times)
        length = 1 + d.below(5, np.maximum(horizon * 2, 1))
        columns = [
            pa.array(last_auction(events) + FIRST_AUCTION_ID),
            self._words.take(d.below(6, _POOL)),
            self._descriptions.take(d.below(7, _POOL)),
            pa.array(initial),
            pa.array(initial + prices(d, 4)),
            _stamps(times),
            _stamps(times + length),
            pa.array(seller + FIRST_PERSON_ID),
            pa.array(FIRST_CATEGORY_ID + d.below(8, NUM_CATEGORIES)),
            self._extras[AUCTION].take(d.below(9, _POOL)),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=AUCTION_SCHEMA)

    def _auction_horizon_ms(self, events: np.ndarray, times: np.ndarray) -> np.ndarray:
        """How long until as many auctions as are in flight have started after each event:
        an auction lasts up to twice that (Nexmark's auction length)."""
        ahead = NUM_IN_FLIGHT_AUCTIONS * PROPORTION_DENOMINATOR // AUCTION_PROPORTION
        return self.config.timestamps_ms(events + ahead) - times

    def _bids(self, events: np.ndarray, d: Draws, times: np.ndarray) -> pa.RecordBatch:
        hot_auction = d.below(1, HOT_AUCTION_RATIO) > 0
        auction = np.where(
            hot_auction,
            (last_auction(events) // HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO,
            next_auction(events, d, 2),
        )
        hot_bidder = d.below(3, HOT_BIDDER_RATIO) > 0
        bidder = np.where(
            hot_bidder,
            (last_person(events) // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1,
            next_person(events, d, 4),
        )
        hot_channel = d.below(5, HOT_CHANNEL_RATIO) > 0
        channel = np.where(
            hot_channel,
            d.below(6, len(HOT_CHANNELS)),
            len(HOT_CHANNELS) + d.below(7, CHANNELS),
        )
        columns = [
            pa.array(auction + FIRST_AUCTION_ID),
            pa.array(bidder + FIRST_PERSON_ID),
            pa.array(prices(d, 8)),
            self._channels.take(channel),
            self._urls.take(d.below(9, _POOL)),
            _stamps(times),
            self._extras[BID].take(d.below(10, _POOL)),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=BID_SCHEMA)


_EXTRA = {PERSON: (100, 140), AUCTION: (330, 410), BID: (40, 60)}
"""Lengths of the ``extra`` padding, so rows average about Nexmark's sizes in bytes."""


def _stamps(millis: np.ndarray) -> pa.Array:
    return pa.array(millis.astype("datetime64[ms]"), type=TIMESTAMP)


def _pool(rng: np.random.Generator, low: int, high: int, alphabet: str = "") -> pa.Array:
    """``_POOL`` random strings of ``low`` to ``high`` characters (lower case letters)."""
    letters = np.frombuffer((alphabet or "abcdefghijklmnopqrstuvwxyz").encode(), np.uint8)
    lengths = rng.integers(low, high + 1, size=_POOL)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    data = letters[rng.integers(0, len(letters), size=int(offsets[-1]))]
    return pa.StringArray.from_buffers(_POOL, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))


def _join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")
