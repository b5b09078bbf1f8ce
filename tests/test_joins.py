"""Interval and window joins of two keyed streams, in the harness and on Spark, checked
against nested loops in plain Python."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from flintlock import (
    CollectSink,
    GraphError,
    ProcessJoinFunction,
    StreamExecutionEnvironment,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from flintlock.core.api.keys import ColumnKey
from flintlock.operators.joins import IntervalJoinOperator, WindowJoinOperator
from flintlock.testing import TwoInputHarness

KEYS = (ColumnKey("k"), ColumnKey("k"))


class Pair(ProcessJoinFunction):
    """One row per pair: key, both ids and the pair's timestamp."""

    def process_element(self, left: Any, right: Any, ctx: Any, out: Any) -> None:
        out.collect(
            {"k": ctx.get_current_key(), "l": left["id"], "r": right["id"], "ts": ctx.timestamp()}
        )


def pair(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    return {"k": left["k"], "l": left["id"], "r": right["id"]}


def sides(seed: int, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    left = [{"k": rng.randrange(3), "t": rng.randrange(1000), "id": f"L{i}"} for i in range(n)]
    right = [{"k": rng.randrange(3), "t": rng.randrange(1000), "id": f"R{i}"} for i in range(n)]
    return left, right


def interval_reference(left: list[Any], right: list[Any], lower: int, upper: int) -> set[Any]:
    return {
        (a["k"], a["id"], b["id"], max(a["t"], b["t"]))
        for a in left
        for b in right
        if a["k"] == b["k"] and a["t"] + lower <= b["t"] <= a["t"] + upper
    }


def window_reference(left: list[Any], right: list[Any], size: int) -> set[Any]:
    return {
        (a["k"], a["id"], b["id"])
        for a in left
        for b in right
        if a["k"] == b["k"] and a["t"] // size == b["t"] // size
    }


def test_interval_join_pairs_rows_within_the_bounds_in_either_arrival_order() -> None:
    left, right = sides(3, 120)
    operator = IntervalJoinOperator(Pair(), KEYS, ("t", "t"), (-20, 35), name="j")
    harness = TwoInputHarness(operator)
    for i in range(0, 120, 30):  # interleave the inputs, out of order within each
        harness.process_records(left[i : i + 30], input_index=1)
        harness.process_records(right[i : i + 30], input_index=2)
    harness.end_input(1)
    harness.end_input(2)
    got = {(r["k"], r["l"], r["r"], r["ts"]) for r in harness.output_rows()}
    assert got == interval_reference(left, right, -20, 35)
    assert len(harness.output_rows()) == len(got)  # each pair once


def test_interval_join_drops_buffered_rows_once_no_row_can_match() -> None:
    operator = IntervalJoinOperator(Pair(), KEYS, ("t", "t"), (0, 10), name="j")
    harness = TwoInputHarness(operator)
    harness.process_records([{"k": 1, "t": 100, "id": "L0"}], input_index=1)
    harness.process_watermark(111, input_index=1)
    harness.process_watermark(111, input_index=2)  # left row at 100 can match up to 110
    backend = operator.context.keyed_backend
    assert backend is not None
    backend.set_current_key(1)
    assert operator._buffers[0].is_empty()  # the timer at 110 dropped the left row
    harness.process_records([{"k": 1, "t": 111, "id": "R0"}], input_index=2)
    harness.process_records([{"k": 1, "t": 105, "id": "R1"}], input_index=2)  # late: dropped
    harness.end_input(1)
    harness.end_input(2)
    assert harness.output_rows() == []
    assert operator.late_records_dropped == 1


def test_window_join_pairs_rows_of_one_key_in_one_window() -> None:
    left, right = sides(5, 80)
    operator = WindowJoinOperator(
        pair, KEYS, ("t", "t"), TumblingEventTimeWindows.of(100), name="wj"
    )
    harness = TwoInputHarness(operator)
    harness.process_records(left, input_index=1)
    harness.process_records(right, input_index=2)
    harness.end_input(1)
    harness.end_input(2)
    got = {(r["k"], r["l"], r["r"]) for r in harness.output_rows()}
    assert got == window_reference(left, right, 100)
    assert len(harness.output_rows()) == len(got)


def test_joins_need_keyed_streams_with_event_time() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    timed = env.from_collection([{"k": 1, "t": 1}], watermark_strategy=WatermarkStrategy("t", 0))
    plain = env.from_collection([{"k": 1, "t": 1}])
    with pytest.raises(GraphError, match="interval_join: the left stream must be keyed"):
        timed.interval_join(timed.key_by("k"))
    with pytest.raises(GraphError, match="interval_join: the right stream has no event time"):
        timed.key_by("k").interval_join(plain.key_by("k"))
    with pytest.raises(GraphError, match="lower bound 5 > upper bound 1"):
        timed.key_by("k").interval_join(timed.key_by("k")).between(5, 1)
    with pytest.raises(GraphError, match="call window"):
        timed.join(timed).where("k").equal_to("k").apply(pair)


@pytest.mark.slow
def test_both_joins_on_spark_equal_plain_python(spark: Any, tmp_path: Path) -> None:
    left, right = sides(9, 600)
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    strategy = WatermarkStrategy("t", 1000)
    a = env.from_collection(left, batch_size=50, watermark_strategy=strategy)
    b = env.from_collection(right, batch_size=50, watermark_strategy=strategy)
    intervals = a.key_by("k").interval_join(b.key_by("k")).between(-5, 5).process(Pair())
    intervals.sink_to(CollectSink("intervals"), name="intervals")
    windows = a.join(b).where("k").equal_to("k").window(TumblingEventTimeWindows.of(50))
    windows.apply(pair).sink_to(CollectSink("windows"), name="windows")
    result = env.execute("joins")
    got = result.collected["intervals"].to_pylist()
    assert {(r["k"], r["l"], r["r"], r["ts"]) for r in got} == interval_reference(
        left, right, -5, 5
    )
    assert len(got) == len(interval_reference(left, right, -5, 5))
    joined = result.collected["windows"].to_pylist()
    assert {(r["k"], r["l"], r["r"]) for r in joined} == window_reference(left, right, 50)
    assert len(joined) == len(window_reference(left, right, 50))
