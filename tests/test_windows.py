"""Event-time windows in the harness: tumbling, sliding and session windows with reduce,
aggregate and process window functions, allowed lateness, restore; checked against plain
Python over the same rows."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

import pytest

from flintlock import (
    EventTimeSessionWindows,
    GraphError,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    StreamExecutionEnvironment,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WatermarkStrategy,
)
from flintlock.core.api.keys import ColumnKey
from flintlock.core.api.window_functions import (
    AggregateContents,
    ListContents,
    ReduceContents,
    WindowContents,
)
from flintlock.core.state.aggregate import AggregateFunction
from flintlock.operators.windows import WindowOperator
from flintlock.testing import OneInputHarness


class Count(AggregateFunction):
    """Rows per window, as a row with the count."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: dict[str, Any], accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> dict[str, Any]:
        return {"n": accumulator}

    def merge(self, a: int, b: int) -> int:
        return a + b


class Describe(ProcessWindowFunction):
    """One row per window: key, bounds, row count and the sum of ``v``."""

    def process(self, key: Any, context: Any, elements: list[Any], out: Any) -> None:
        window = context.window
        total = sum(e["v"] for e in elements) if elements and "v" in elements[0] else None
        out.collect(
            {"k": key, "start": window.start, "end": window.end, "n": len(elements), "sum": total}
        )


class Label(ProcessWindowFunction):
    """Adds key and window bounds to the single aggregate result."""

    def process(self, key: Any, context: Any, elements: list[Any], out: Any) -> None:
        [result] = elements
        out.collect({"k": key, "start": context.window.start, **result})


def window_operator(assigner: Any, contents: WindowContents, lateness: int = 0) -> WindowOperator:
    return WindowOperator(
        assigner, contents, ColumnKey("k"), "t", allowed_lateness=lateness, name="w"
    )


def rows(*pairs: tuple[str, int], v: int = 1) -> list[dict[str, Any]]:
    return [{"k": k, "t": t, "v": v} for k, t in pairs]


def sorted_rows(harness: OneInputHarness) -> list[dict[str, Any]]:
    return sorted(harness.output_rows(), key=lambda r: tuple(str(v) for v in r.values()))


def test_tumbling_windows_fire_when_the_watermark_passes_their_end() -> None:
    harness = OneInputHarness(
        window_operator(TumblingEventTimeWindows.of(10), ListContents(Describe()))
    )
    harness.process_records(rows(("a", 1), ("a", 9), ("b", 3), ("a", 10), ("b", 25)))
    harness.process_watermark(8)
    assert harness.output_rows() == []  # [0, 10) ends at 9
    harness.process_watermark(9)
    assert sorted_rows(harness) == [
        {"k": "a", "start": 0, "end": 10, "n": 2, "sum": 2},
        {"k": "b", "start": 0, "end": 10, "n": 1, "sum": 1},
    ]
    harness.end_input()  # the max watermark fires the rest
    assert sorted(harness.output_rows()[2:], key=lambda r: r["start"]) == [
        {"k": "a", "start": 10, "end": 20, "n": 1, "sum": 1},
        {"k": "b", "start": 20, "end": 30, "n": 1, "sum": 1},
    ]


def test_reduce_emits_the_reduced_row_per_window() -> None:
    def add(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        return {"k": a["k"], "t": max(a["t"], b["t"]), "v": a["v"] + b["v"]}

    harness = OneInputHarness(
        window_operator(TumblingEventTimeWindows.of(100), ReduceContents(add, None))
    )
    data = [{"k": k, "t": t, "v": t} for k, t in [("x", 5), ("x", 50), ("y", 7), ("x", 150)]]
    harness.process_records(data)
    harness.end_input()
    assert sorted_rows(harness) == [
        {"k": "x", "t": 150, "v": 150},
        {"k": "x", "t": 50, "v": 55},
        {"k": "y", "t": 7, "v": 7},
    ]


def sliding_reference(data: list[dict[str, Any]], size: int, slide: int) -> Counter[Any]:
    counts: Counter[Any] = Counter()
    for row in data:
        start = row["t"] - row["t"] % slide
        while start > row["t"] - size:
            counts[(row["k"], start)] += 1
            start -= slide
    return counts


def test_sliding_windows_count_like_plain_python_on_out_of_order_rows() -> None:
    rng = random.Random(7)
    data = [{"k": rng.choice("abc"), "t": rng.randrange(0, 1000), "v": 1} for _ in range(500)]
    harness = OneInputHarness(
        window_operator(SlidingEventTimeWindows.of(100, 25), AggregateContents(Count(), Label()))
    )
    harness.process_records(data)  # no watermark before the end: nothing is late
    harness.end_input()
    got = Counter({(r["k"], r["start"]): r["n"] for r in harness.output_rows()})
    assert got == sliding_reference(data, 100, 25)
    assert len(harness.output_rows()) == len(got)  # one firing per window


def sessions_reference(data: list[dict[str, Any]], gap: int) -> list[tuple[Any, int, int, int]]:
    by_key: dict[Any, list[int]] = defaultdict(list)
    for row in data:
        by_key[row["k"]].append(row["t"])
    sessions = []
    for key, stamps in by_key.items():
        stamps.sort()
        start, end, n = stamps[0], stamps[0] + gap, 0
        for t in stamps:
            if t > end:  # windows [t, t + gap) touch when t == end
                sessions.append((key, start, end, n))
                start, n = t, 0
            end, n = max(end, t + gap), n + 1
        sessions.append((key, start, end, n))
    return sorted(sessions)


def test_session_windows_merge_whatever_order_rows_arrive_in() -> None:
    rng = random.Random(11)
    data = [{"k": rng.choice("ab"), "t": rng.randrange(0, 2000), "v": 1} for _ in range(120)]
    harness = OneInputHarness(
        window_operator(EventTimeSessionWindows.with_gap(30), ListContents(Describe()))
    )
    harness.process_records(data)
    harness.end_input()
    got = sorted((r["k"], r["start"], r["end"], r["n"]) for r in harness.output_rows())
    assert got == sessions_reference(data, 30)


def test_a_late_row_within_the_allowed_lateness_fires_the_window_again() -> None:
    operator = window_operator(
        TumblingEventTimeWindows.of(10), AggregateContents(Count(), Label()), lateness=5
    )
    harness = OneInputHarness(operator)
    harness.process_records(rows(("a", 2), ("a", 4)))
    harness.process_watermark(9)
    assert harness.output_rows() == [{"k": "a", "start": 0, "n": 2}]
    harness.process_records(rows(("a", 3)))  # late, but within 5 ms of lateness
    assert harness.output_rows()[1:] == [{"k": "a", "start": 0, "n": 3}]
    harness.process_watermark(14)  # window end - 1 + lateness: its state is dropped
    harness.process_records(rows(("a", 1)))  # too late: dropped and counted
    harness.end_input()
    assert harness.output_rows()[2:] == []
    assert operator.late_records_dropped == 1


def test_windows_survive_a_checkpoint_and_restore() -> None:
    contents = ListContents(Describe())
    first = OneInputHarness(window_operator(TumblingEventTimeWindows.of(10), contents))
    first.process_records(rows(("a", 1), ("a", 12), ("b", 5)))
    first.process_watermark(9)
    fired_before = sorted_rows(first)
    snapshot = first.checkpoint(1)

    restored = OneInputHarness(
        window_operator(TumblingEventTimeWindows.of(10), ListContents(Describe())),
        restore_from=snapshot,
    )
    restored.process_records(rows(("a", 15)))
    restored.end_input()
    assert fired_before == [
        {"k": "a", "start": 0, "end": 10, "n": 1, "sum": 1},
        {"k": "b", "start": 0, "end": 10, "n": 1, "sum": 1},
    ]
    assert restored.output_rows() == [{"k": "a", "start": 10, "end": 20, "n": 2, "sum": 2}]


def test_window_assigners_match_flink() -> None:
    assert TumblingEventTimeWindows.of(10).assign(-1) == [TimeWindow(-10, 0)]
    assert TumblingEventTimeWindows.of(10, 3).assign(2) == [TimeWindow(-7, 3)]
    assert SlidingEventTimeWindows.of(10, 5).assign(12) == [TimeWindow(10, 20), TimeWindow(5, 15)]
    assert EventTimeSessionWindows.with_gap(5).assign(7) == [TimeWindow(7, 12)]
    with pytest.raises(ValueError, match="tumbling window size must be a positive int"):
        TumblingEventTimeWindows.of(0)


def test_windows_need_a_keyed_stream_with_event_time() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    plain = env.from_collection([{"k": "a", "t": 1}])
    with pytest.raises(GraphError, match="windows need a keyed stream"):
        plain.window(TumblingEventTimeWindows.of(10))
    with pytest.raises(GraphError, match="event-time windows need event time"):
        plain.key_by("k").window(TumblingEventTimeWindows.of(10))
    timed = env.from_collection([{"k": "a", "t": 1}], watermark_strategy=WatermarkStrategy("t", 0))
    with pytest.raises(GraphError, match="aggregate: give an AggregateFunction"):
        timed.key_by("k").window(TumblingEventTimeWindows.of(10)).aggregate(lambda r: r)  # type: ignore[arg-type]


def test_processing_time_windows_fire_when_the_clock_passes_their_end() -> None:
    operator = WindowOperator(
        TumblingProcessingTimeWindows.of(10),
        ListContents(Describe()),
        ColumnKey("k"),
        None,
        name="w",
    )
    harness = OneInputHarness(operator)
    harness.set_processing_time(3)
    harness.process_records([{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}])
    harness.set_processing_time(8)
    assert harness.output_rows() == []  # [0, 10) fires at its last millisecond, 9
    harness.process_records([{"k": "a", "v": 4}])
    harness.set_processing_time(9)
    assert sorted_rows(harness) == [
        {"k": "a", "start": 0, "end": 10, "n": 3, "sum": 8},
        {"k": "b", "start": 0, "end": 10, "n": 1, "sum": 2},
    ]
    harness.set_processing_time(10)
    harness.process_records([{"k": "a", "v": 5}])  # in [10, 20): pending at the end
    harness.end_input()  # end of input stops processing time: it never fires (Flink)
    assert len(harness.output_rows()) == 2


def test_processing_time_windows_need_no_event_time() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    plain = env.from_collection([{"k": "a", "v": 1}]).key_by("k")
    with pytest.raises(GraphError, match="event-time windows need event time"):
        plain.window(TumblingEventTimeWindows.of(10))
    windowed = plain.window(TumblingProcessingTimeWindows.of(10)).process(Describe(), name="w")
    operator = windowed.transformation.make_operator()
    assert isinstance(operator, WindowOperator)
    assert not operator.event_time and operator.timestamp_column is None
