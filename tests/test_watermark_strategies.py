"""Watermark strategies at sources and mid-stream, the watermark interval, idleness, and
the watermark as the min over channels and inputs — in the harness."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

from flintlock import (
    CoProcessFunction,
    EventTimeError,
    ManualClock,
    OneInputStreamOperator,
    Source,
    SourceReader,
    Watermark,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
)
from flintlock.core.sources.source import CollectionSource, SourceOperator
from flintlock.operators.process import CoProcessOperator
from flintlock.operators.watermark_assigner import TimestampsAndWatermarksOperator
from flintlock.testing import OneInputHarness, SourceHarness, TwoInputHarness

MAX = 2**63 - 1


class EventTimeLog(OneInputStreamOperator):
    """Passes batches on; logs rows, watermarks and statuses in the order they arrive."""

    def __init__(self) -> None:
        super().__init__("log")
        self.log: list[tuple[str, Any]] = []

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.log.append(("rows", batch.num_rows))
        self.output.emit(batch)

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        self.log.append(("watermark", watermark.timestamp))
        super().process_watermark(watermark, input_index)

    def process_watermark_status(self, idle: bool, input_index: int = 1) -> None:
        self.log.append(("idle" if idle else "active", input_index))
        super().process_watermark_status(idle, input_index)


def batches(*stamps: list[int]) -> CollectionSource:
    return CollectionSource([pa.record_batch({"t": pa.array(s, pa.int64())}) for s in stamps])


def source_log(strategy: WatermarkStrategy, source: Source, **kwargs: Any) -> list[tuple[str, Any]]:
    log = EventTimeLog()
    SourceHarness(SourceOperator(source, strategy), log, **kwargs).run()
    return log.log


def test_bounded_monotonous_and_no_watermarks() -> None:
    data = ([5, 3, 9], [7, 12], [10])
    assert source_log(WatermarkStrategy("t", 2), batches(*data)) == [
        ("rows", 3),
        ("watermark", 6),  # max 9 - 2 - 1
        ("rows", 2),
        ("watermark", 9),
        ("rows", 1),  # max still 12: no new watermark
        ("watermark", MAX),
    ]
    monotonous = WatermarkStrategy.for_monotonous_timestamps("t")
    assert [e for e in source_log(monotonous, batches(*data)) if e[0] == "watermark"] == [
        ("watermark", 8),
        ("watermark", 11),
        ("watermark", MAX),
    ]
    none = WatermarkStrategy.no_watermarks()
    assert [e for e in source_log(none, batches(*data)) if e[0] == "watermark"] == [
        ("watermark", MAX)
    ]


def test_a_custom_generator_emits_punctuated_and_periodic_watermarks() -> None:
    class EveryTenth(WatermarkGenerator):
        """Punctuated: a watermark at each multiple of 10 seen; nothing periodic."""

        def on_event(
            self, batch: pa.RecordBatch, timestamps: pa.Array, output: WatermarkOutput
        ) -> None:
            tens = [t for t in timestamps.to_pylist() if t % 10 == 0]
            if tens:
                output.emit_watermark(max(tens))

    strategy = WatermarkStrategy.for_generator(EveryTenth, "t")
    assert source_log(strategy, batches([1, 10, 4], [5], [30, 20])) == [
        ("rows", 3),
        ("watermark", 10),
        ("rows", 1),
        ("rows", 2),
        ("watermark", 30),
        ("watermark", MAX),
    ]
    with pytest.raises(Exception) as caught:
        source_log(WatermarkStrategy.for_generator(lambda: 3, "t"), batches([1]))
    assert isinstance(caught.value.__cause__, EventTimeError)
    assert "returned int, not a WatermarkGenerator" in str(caught.value.__cause__)


def test_interval_in_rows_slices_batches_and_in_millis_follows_the_clock() -> None:
    every_two = WatermarkStrategy("t").with_interval(rows=2)
    assert source_log(every_two, batches([1, 2, 3, 4, 5])) == [
        ("rows", 2),
        ("watermark", 1),
        ("rows", 2),
        ("watermark", 3),
        ("rows", 1),
        ("watermark", 4),
        ("watermark", MAX),
    ]

    clock = ManualClock(0)
    steps = iter([0, 50, 100, 120])  # processing time when each batch is read

    class Timed(Source):
        def create_reader(
            self, subtask: int, parallelism: int, positions: dict[str, int]
        ) -> SourceReader:
            return _TimedReader([[1], [2], [3], [4]], steps, clock)

    every_100ms = WatermarkStrategy("t").with_interval(millis=100)
    assert [e for e in source_log(every_100ms, Timed(), clock=clock) if e[0] == "watermark"] == [
        ("watermark", 2),  # the periodic emit after the batch read at 100 ms
        ("watermark", MAX),
    ]
    with pytest.raises(EventTimeError, match="one of rows= or millis="):
        WatermarkStrategy("t").with_interval()


class _TimedReader(SourceReader):
    """Yields its batches, setting the clock before each (a slow source, made exact)."""

    def __init__(self, stamps: list[list[int]], steps: Iterator[int], clock: ManualClock) -> None:
        self.stamps, self.steps, self.clock = stamps, steps, clock

    def read(self) -> Iterator[pa.RecordBatch]:
        for stamps in self.stamps:
            self.clock.set(next(self.steps))
            yield pa.record_batch({"t": pa.array(stamps, pa.int64())})

    def positions(self) -> dict[str, int]:
        return {}


def test_an_idle_source_says_so_and_becomes_active_with_its_next_rows() -> None:
    clock = ManualClock(0)

    class Slow(Source):
        def create_reader(
            self, subtask: int, parallelism: int, positions: dict[str, int]
        ) -> SourceReader:
            # a batch at 0 ms, empty batches ("nothing now") at 100 and 120 ms, rows at 130
            return _TimedReader([[9, 3], [], [], [20]], iter([0, 100, 120, 130]), clock)

    strategy = WatermarkStrategy("t").with_idleness(timedelta(milliseconds=50))
    assert source_log(strategy, Slow(), clock=clock) == [
        ("rows", 2),
        ("watermark", 8),
        ("rows", 0),
        ("idle", 1),  # 100 ms without a row >= 50 ms
        ("rows", 0),  # still idle: said once
        ("rows", 1),
        ("active", 1),  # rows again: active before the new watermark
        ("watermark", 19),
        ("watermark", MAX),
    ]


def test_watermark_is_the_min_over_active_channels() -> None:
    harness = OneInputHarness(EventTimeLog(), input_channels={1: 2})
    harness.process_watermark(10, channel=0)
    harness.process_watermark(5, channel=1)  # min(10, 5)
    harness.process_watermark_status(True, channel=1)  # channel 1 leaves the min: 10
    harness.process_watermark_status(True, channel=0)  # all idle: the input is idle
    harness.process_watermark_status(False, channel=1)  # active again, but behind (5 < 10)
    harness.process_watermark(7, channel=1)  # still behind: not counted
    harness.process_watermark(12, channel=0)  # a watermark makes channel 0 active: 12
    harness.process_watermark(15, channel=1)  # caught up: min(12, 15) = 12, no change
    harness.process_watermark(20, channel=0)  # min(20, 15)
    assert harness.watermarks == [5, 10, 12, 15]
    assert harness.watermark_statuses == [True, False]


def test_watermark_is_the_min_over_inputs_and_an_idle_input_leaves_it() -> None:
    class Nothing(CoProcessFunction):
        def process_element1(self, value: Any, ctx: Any, out: Any) -> None: ...

        def process_element2(self, value: Any, ctx: Any, out: Any) -> None: ...

    harness = TwoInputHarness(CoProcessOperator(Nothing(), name="co"))
    harness.process_watermark(10, input_index=1)
    harness.process_watermark(4, input_index=2)  # min(10, 4)
    harness.process_watermark(12, input_index=2)  # min(10, 12)
    harness.process_watermark_status(True, input_index=1)  # input 1 leaves the min: 12
    harness.process_watermark(14, input_index=1)  # input 1 active again: min(14, 12) = 12
    harness.process_watermark(20, input_index=2)  # min(14, 20)
    assert harness.watermarks == [4, 10, 12, 14]
    assert harness.watermark_statuses == []  # input 2 never went idle: the output did not


def test_assign_timestamps_and_watermarks_replaces_upstream_event_time() -> None:
    assigner = TimestampsAndWatermarksOperator(WatermarkStrategy("t", 1), name="assign")
    harness = OneInputHarness(assigner)
    harness.process_watermark(1000)  # upstream's: dropped
    harness.process_records([{"t": 5}, {"t": 3}])
    harness.process_watermark_status(True)  # upstream's idleness: dropped too
    harness.process_records([{"t": 4}])
    harness.end_input()  # MAX_WATERMARK passes
    assert harness.watermarks == [3, MAX]
    assert harness.watermark_statuses == []


def test_timestamp_columns_are_epoch_milliseconds() -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    stamps = [start + timedelta(seconds=s) for s in (0, 7, 3)]
    table = pa.table({"at": pa.array(stamps, pa.timestamp("us", tz="UTC"))})
    strategy = WatermarkStrategy("at", timedelta(seconds=2))
    log = source_log(strategy, CollectionSource(table))
    millis = int(start.timestamp() * 1000)
    assert [e for e in log if e[0] == "watermark"] == [
        ("watermark", millis + 7000 - 2000 - 1),
        ("watermark", MAX),
    ]
    with pytest.raises(EventTimeError, match="need a timestamp_column"):
        WatermarkStrategy(None)
