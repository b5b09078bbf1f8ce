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
    ManualClock,
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


def test_a_split_starts_each_epoch_from_its_watermark_and_a_late_row_keeps_it() -> None:
    first, snapshot = epoch([[["a", 100], ["b", 50]]], BOUNDED)
    assert watermarks(first) == [49]
    late_a, snapshot = epoch([[["a", 20]]], BOUNDED, restore_from=snapshot)
    assert watermarks(late_a) == [99]  # 'a' was at 99: a late row does not pull it back
    only_a, _ = epoch([[["a", 500]]], BOUNDED, restore_from=snapshot)
    assert watermarks(only_a) == [499]  # 'b' is read by no subtask now: it holds nothing


def test_a_subtask_that_reads_nothing_in_an_epoch_is_idle() -> None:
    _, snapshot = epoch([[["a", 100], ["b", 50]]], BOUNDED)
    nothing, snapshot = epoch([], BOUNDED, restore_from=snapshot)
    assert watermarks(nothing) == ["idle"]
    back, _ = epoch([[["b", 70]]], BOUNDED, restore_from=snapshot)
    assert watermarks(back) == [69]  # its splits' entries went on through the idle epoch


def test_a_split_of_the_subtask_that_goes_quiet_becomes_idle_and_leaves_the_minimum() -> None:
    idle_after = BOUNDED.with_idleness(1000)
    batches = [[["a", 100], ["b", 50]], [["a", 300]]]
    log, _ = epoch(batches, idle_after, now=0)
    assert watermarks(log) == [49]  # 'b' was read 0 ms ago: it still holds
    clock = ManualClock(0)

    class Later(SplitNamingReader):
        def read(self) -> Iterator[pa.RecordBatch]:
            for batch in super().read():
                yield batch
                clock.advance(1500)  # 'b' gets nothing for 1.5 s

    source = PlannedSource()
    source.create_epoch_reader = lambda i, p, splits: Later(splits)  # type: ignore[method-assign]
    quiet = WatermarkLog()
    SourceHarness(
        SourceOperator(source, idle_after, name="src"),
        quiet,
        source_epoch=SourceEpoch(batches, False),
        final=False,
        clock=clock,
    ).run()
    # 'b' idle after 1 s without rows; at the end of reading, 1.5 s after its last row, 'a' too
    assert watermarks(quiet.log) == [49, 299, "idle"]


def test_after_a_rescale_a_split_moves_with_its_watermark() -> None:
    _, zero = epoch([[["a", 100]]], BOUNDED, parallelism=2, subtask_index=0)
    _, one = epoch([[["b", 300]]], BOUNDED, parallelism=2, subtask_index=1)
    restore = TaskRestore(1, [zero, one])
    late_a, _ = epoch([[["a", 50]]], BOUNDED, restore_from=restore)
    assert watermarks(late_a) == [99]  # 'a' (read by old subtask 0) kept its watermark
