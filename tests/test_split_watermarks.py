"""Per-split watermarks at a source's head (Flink's per-partition watermarks): the
minimum over the splits, per-split idleness, and each split's watermark carried across
epochs and rescales in union state — in the harness."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flintlock import (
    EpochSplits,
    OneInputStreamOperator,
    SourceReader,
    UnboundedSource,
    Watermark,
    WatermarkStrategy,
)
from flintlock.core.checkpoint.snapshots import TaskRestore, TaskSnapshot
from flintlock.core.sources.source import SourceEpoch, SourceOperator
from flintlock.testing import SourceHarness

SCHEMA = pa.schema([("split", pa.string()), ("t", pa.int64())])


class TaggedReader(SourceReader):
    """Yields the epoch's planned batches; each row names its split in column ``split``
    (which the reader does not tell the source operator: watermarks per subtask)."""

    def __init__(self, batches: list[list[list[Any]]]) -> None:
        self.batches = batches

    def read(self) -> Iterator[pa.RecordBatch]:
        for rows in self.batches:
            splits, stamps = zip(*rows, strict=True) if rows else ((), ())
            yield pa.record_batch([pa.array(splits, pa.string()), pa.array(stamps)], SCHEMA)

    def positions(self) -> dict[str, int]:
        return {split: 0 for rows in self.batches for split, _ in rows}


class SplitNamingReader(TaggedReader):
    """A TaggedReader that says which split each row is of: watermarks per split."""

    def split_ids(self, batch: pa.RecordBatch) -> pa.Array:
        return batch.column("split")


class PlannedSource(UnboundedSource):
    """An epoch's splits are its batches: ``[[split, t], ...]`` per batch."""

    name = "planned"
    schema = SCHEMA

    def __init__(self, names_splits: bool = True) -> None:
        self.names_splits = names_splits

    def initial_state(self, now_ms: int) -> Any:
        return {}

    def plan_epoch(self, state: Any, now_ms: int, parallelism: int) -> EpochSplits:
        return EpochSplits([[] for _ in range(parallelism)], state)

    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[Any]
    ) -> SourceReader:
        return (SplitNamingReader if self.names_splits else TaggedReader)(splits)


class WatermarkLog(OneInputStreamOperator):
    """Logs the watermarks and idleness changes that reach it, in order."""

    def __init__(self) -> None:
        super().__init__("log")
        self.log: list[tuple[str, Any]] = []

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.log.append(("rows", pc.unique(batch.column("split")).to_pylist()))

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        self.log.append(("watermark", watermark.timestamp))
        super().process_watermark(watermark, input_index)

    def process_watermark_status(self, idle: bool, input_index: int = 1) -> None:
        self.log.append(("idle" if idle else "active", input_index))
        super().process_watermark_status(idle, input_index)


def epoch(
    batches: list[list[list[Any]]],
    strategy: WatermarkStrategy,
    restore_from: TaskSnapshot | TaskRestore | None = None,
    now: int = 0,
    names_splits: bool = True,
    **kwargs: Any,
) -> tuple[list[tuple[str, Any]], TaskSnapshot]:
    """One epoch of one source subtask reading ``batches``; its log and snapshot."""
    from flintlock import ManualClock

    log = WatermarkLog()
    head = SourceOperator(PlannedSource(names_splits), strategy, name="src")
    harness = SourceHarness(
        head,
        log,
        source_epoch=SourceEpoch(batches, False),
        final=False,
        restore_from=restore_from,
        clock=ManualClock(now),
        **kwargs,
    )
    return log.log, harness.run()


def watermarks(log: list[tuple[str, Any]]) -> list[Any]:
    return [
        entry[1] if entry[0] == "watermark" else entry[0] for entry in log if entry[0] != "rows"
    ]


BOUNDED = WatermarkStrategy("t", 0)


def test_the_watermark_is_the_minimum_over_the_splits_of_a_subtask() -> None:
    batches = [[["a", 100]], [["b", 10]], [["b", 200]], [["a", 300], ["b", 250]]]
    per_split, _ = epoch(batches, BOUNDED)
    assert watermarks(per_split) == [9, 99, 249]  # 'b' holds back from the start
    per_subtask, _ = epoch(batches, BOUNDED, names_splits=False)
    assert watermarks(per_subtask) == [99, 199, 299]  # 'b's row at 10 came late


def test_a_split_with_no_rows_in_an_epoch_holds_event_time_back_across_epochs() -> None:
    first, snapshot = epoch([[["a", 100], ["b", 50]]], BOUNDED)
    assert watermarks(first) == [49]
    only_a, snapshot = epoch([[["a", 500]]], BOUNDED, restore_from=snapshot)
    assert watermarks(only_a) == [49]  # 'b' read nothing new: still at 49
    b_moves, _ = epoch([[["b", 400]]], BOUNDED, restore_from=snapshot)
    assert watermarks(b_moves) == [399]  # 'a' restored at 499


def test_a_subtask_that_reads_nothing_passes_the_restored_minimum_on() -> None:
    _, snapshot = epoch([[["a", 100], ["b", 50]]], BOUNDED)
    nothing, _ = epoch([], BOUNDED, restore_from=snapshot)
    assert watermarks(nothing) == [49]


def test_an_idle_split_leaves_the_minimum_and_all_idle_is_an_idle_subtask() -> None:
    idle_after = BOUNDED.with_idleness(1000)
    _, snapshot = epoch([[["a", 100], ["b", 50]]], idle_after, now=0)
    a_goes_on, snapshot = epoch([[["a", 500]]], idle_after, restore_from=snapshot, now=1500)
    assert watermarks(a_goes_on) == [499]  # 'b' was last read 1.5 s ago: idle
    none, _ = epoch([], idle_after, restore_from=snapshot, now=3000)
    assert watermarks(none) == ["idle"]
    b_back, _ = epoch([[["b", 700]]], idle_after, restore_from=snapshot, now=3000)
    assert watermarks(b_back) == [699]  # 'a' idle since 1500, 'b' active with its row


def test_after_a_rescale_every_subtask_knows_every_splits_watermark() -> None:
    _, zero = epoch([[["a", 100]]], BOUNDED, parallelism=2, subtask_index=0)
    _, one = epoch([[["b", 300]]], BOUNDED, parallelism=2, subtask_index=1)
    restore = TaskRestore(1, [zero, one])
    alone, _ = epoch([[["b", 900]]], BOUNDED, restore_from=restore)
    assert watermarks(alone) == [99]  # 'a' (read by old subtask 0) holds it back
