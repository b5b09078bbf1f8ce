"""Keyed MapState a batch at a time (``contains_entries``, ``put_entries``, ``sizes``): the
same sets as per-record ``contains``/``put`` keep, on every backend, across a checkpoint,
with a TTL, and read back per record."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from flintlock import (
    KeyedBatchProcessFunction,
    KeyedProcessFunction,
    ManualClock,
    MapStateDescriptor,
    StateTtlConfig,
)
from flintlock.operators.batch_process import KeyedBatchProcessOperator
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import OneInputHarness

BACKENDS = ["hashmap", "sqlite", "key-group-dicts"]


class DistinctItems(KeyedBatchProcessFunction):
    """Per row: was the item new to its user; per user of the batch: how many distinct."""

    def __init__(self, ttl_ms: int | None = None) -> None:
        config = StateTtlConfig(ttl_ms) if ttl_ms else None
        self.descriptor = MapStateDescriptor("seen", pa.int64(), pa.string(), ttl_config=config)

    def open(self) -> None:
        self.seen = self.runtime_context.get_map_state(self.descriptor)

    def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> pa.RecordBatch:
        known = self.seen.contains_entries(keys, batch.column("item"))
        self.seen.put_entries(keys, batch.column("item"), batch.column("note"))
        return pa.record_batch({"user": keys, "known": known, "distinct": self.seen.sizes(keys)})


def events(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {"user": rng.randrange(6), "item": rng.randrange(15), "note": f"n{i}"} for i in range(count)
    ]


def reference(rows: list[dict[str, Any]], batch_rows: int) -> list[tuple[int, bool, int]]:
    """In plain Python: a row is known if an earlier batch put its item (a batch's rows
    are looked up before its puts); distinct counts are read after the batch's puts."""
    sets: dict[int, set[int]] = {}
    out = []
    for start in range(0, len(rows), batch_rows):
        batch = rows[start : start + batch_rows]
        known = []
        for row in batch:
            known.append(row["item"] in sets.setdefault(row["user"], set()))
        for row in batch:
            sets[row["user"]].add(row["item"])
        out += [(r["user"], k, len(sets[r["user"]])) for r, k in zip(batch, known, strict=True)]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_sets_equal_plain_python_across_a_checkpoint(backend: str) -> None:
    rows, batch_rows = events(400, seed=3), 25
    first = OneInputHarness(
        KeyedBatchProcessOperator(DistinctItems(), key_column="user"), state_backend=backend
    )
    for start in range(0, 200, batch_rows):
        first.process_records(rows[start : start + batch_rows])
    second = OneInputHarness(
        KeyedBatchProcessOperator(DistinctItems(), key_column="user"),
        state_backend=backend,
        restore_from=first.checkpoint(1),
    )
    for start in range(200, 400, batch_rows):
        second.process_records(rows[start : start + batch_rows])
    found = [(r["user"], r["known"], r["distinct"]) for r in first.output_rows()]
    found += [(r["user"], r["known"], r["distinct"]) for r in second.output_rows()]
    assert found == reference(rows, batch_rows)


NOTES = pa.schema([("user", pa.int64()), ("note", pa.string())])


class LastNote(KeyedProcessFunction):
    """Per record: the map's value for the row's item (what the batch form stored)."""

    def open(self) -> None:
        descriptor = MapStateDescriptor("seen", pa.int64(), pa.string())
        self.seen = self.runtime_context.get_map_state(descriptor)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        out.collect({"user": value["user"], "note": self.seen.get(value["item"])})


@pytest.mark.parametrize("backend", ["hashmap", "sqlite"])
def test_entries_put_a_batch_at_a_time_read_back_per_record(backend: str) -> None:
    batch = OneInputHarness(
        KeyedBatchProcessOperator(DistinctItems(), key_column="user", name="items"),
        state_backend=backend,
    )
    batch.process_records(
        [{"user": 1, "item": 7, "note": "a"}, {"user": 1, "item": 7, "note": "b"}]
    )  # the later row of an entry wins
    batch.process_records([{"user": 2, "item": 7, "note": "c"}])
    per_record = OneInputHarness(
        KeyedProcessOperator(LastNote(), key_column="user", name="items", output_schema=NOTES),
        state_backend=backend,
        restore_from=batch.checkpoint(1),
    )
    per_record.process_records([{"user": 1, "item": 7}, {"user": 2, "item": 7}])
    per_record.process_records([{"user": 3, "item": 7}, {"user": 1, "item": 8}])
    notes = [r["note"] for r in per_record.output_rows()]
    assert notes == ["b", "c", None, None]


def test_expired_entries_are_neither_contained_nor_counted() -> None:
    clock = ManualClock()
    harness = OneInputHarness(
        KeyedBatchProcessOperator(DistinctItems(ttl_ms=10), key_column="user"),
        ttl_clock=clock,
    )
    harness.process_records([{"user": 1, "item": 1, "note": "x"}])
    clock.advance(5)
    harness.process_records([{"user": 1, "item": 2, "note": "y"}])
    clock.advance(6)  # item 1 (written at 0) expired at 10; item 2 (at 5) lives to 15
    harness.process_records(
        [{"user": 1, "item": 1, "note": "z"}, {"user": 1, "item": 2, "note": "w"}]
    )
    rows = [(r["known"], r["distinct"]) for r in harness.output_rows()]
    assert rows == [(False, 1), (False, 2), (False, 2), (True, 2)]


def test_python_lists_of_keys_and_entries_are_taken_as_they_are() -> None:
    function = DistinctItems()
    harness = OneInputHarness(KeyedBatchProcessOperator(function, key_column="user"))
    harness.process_records([{"user": 1, "item": 4, "note": "a"}])
    seen = function.seen
    found = seen.contains_entries([1, 1, 2], [4, 5, 4])
    assert found.to_pylist() == [True, False, False]
    seen.put_entries([2], [9])
    assert seen.sizes([1, 2, 3]).to_pylist() == [1, 1, 0]
