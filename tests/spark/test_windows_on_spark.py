"""Event-time windows on Spark over out-of-order rows, checked against pyarrow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from flintlock import (
    CollectSink,
    EventTimeSessionWindows,
    OutputTag,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from flintlock.core.state.aggregate import AggregateFunction

N = 20_000


class CountRows(AggregateFunction):
    """Rows per window."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: dict[str, Any], accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, a: int, b: int) -> int:
        return a + b


class KeyAndWindow(ProcessWindowFunction):
    """The aggregate with its key and window start."""

    def process(self, key: Any, context: Any, elements: list[Any], out: Any) -> None:
        out.collect({"k": key, "start": context.window.start, "n": elements[0]})


def out_of_order_rows() -> pa.Table:
    i = np.arange(N, dtype=np.int64)
    return pa.table({"k": i % 7, "ts": i - ((i * 7919) % 500)})


def as_set(table: pa.Table) -> set[tuple[int, int, int]]:
    columns = [table.column(c).to_pylist() for c in ("k", "start", "n")]
    return set(zip(*columns, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("parallelism", [1, 2])
def test_tumbling_counts_equal_a_pyarrow_group_by(
    spark: Any, tmp_path: Path, parallelism: int
) -> None:
    data = out_of_order_rows()
    env = StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=str(tmp_path)
    )
    stream = env.from_arrow(data, batch_size=1000, watermark_strategy=WatermarkStrategy("ts", 500))
    windows = stream.key_by("k").window(TumblingEventTimeWindows.of(1000))
    got = windows.aggregate(CountRows(), KeyAndWindow()).execute_and_collect(
        f"tumbling-{parallelism}"
    )

    starts = np.floor_divide(data.column("ts").to_numpy(), 1000) * 1000
    reference = (
        pa.table({"k": data.column("k"), "start": starts})
        .group_by(["k", "start"])
        .aggregate([("k", "count")])
        .rename_columns(["k", "start", "n"])
    )
    assert as_set(got) == as_set(reference)
    assert got.num_rows == reference.num_rows  # every window fired once


class SessionBounds(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: list[Any], out: Any) -> None:
        window = context.window
        out.collect({"k": key, "start": window.start, "end": window.end, "n": len(elements)})


@pytest.mark.slow
def test_sessions_on_two_subtasks_equal_plain_python(spark: Any, tmp_path: Path) -> None:
    stamps = [t for t in range(0, 3000, 7) if (t // 100) % 3 != 0]  # gaps of 100+ ms
    rows = [{"k": t % 2, "ts": t} for t in reversed(stamps)]
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    stream = env.from_collection(
        rows, batch_size=50, watermark_strategy=WatermarkStrategy("ts", 3000)
    )
    got = stream.key_by("k").window(EventTimeSessionWindows.with_gap(50)).process(SessionBounds())
    table = got.execute_and_collect("sessions")
    expected = set()
    for key in (0, 1):
        mine = sorted(t for t in stamps if t % 2 == key)
        start = end = None
        n = 0
        for t in mine:
            if end is not None and t > end:
                expected.add((key, start, end, n))
                start, n = None, 0
            start = t if start is None else start
            end, n = t + 50, n + 1
        expected.add((key, start, end, n))
    columns = [table.column(c).to_pylist() for c in ("k", "start", "end", "n")]
    assert set(zip(*columns, strict=True)) == expected


def simulate(data: pa.Table, batch_size: int, bound: int, size: int) -> tuple[Any, list[int]]:
    """Plain Python at parallelism 1: the source's watermark after each batch decides
    which rows are late; the others are counted per (key, window start)."""
    keys, stamps = data.column("k").to_pylist(), data.column("ts").to_pylist()
    watermark, top = -(2**63), -(2**63)
    counts: dict[tuple[int, int], int] = {}
    late = []
    for first in range(0, len(stamps), batch_size):
        for k, ts in zip(
            keys[first : first + batch_size], stamps[first : first + batch_size], strict=True
        ):
            start = ts - ts % size
            if start + size - 1 <= watermark:
                late.append(ts)
            else:
                counts[(k, start)] = counts.get((k, start), 0) + 1
            top = max(top, ts)
        watermark = max(watermark, top - bound - 1)
    return {(k, s, n) for (k, s), n in counts.items()}, sorted(late)


@pytest.mark.slow
@pytest.mark.parametrize("batch_level", [False, True])
def test_late_rows_go_to_the_late_data_side_output(
    spark: Any, tmp_path: Path, batch_level: bool
) -> None:
    data = out_of_order_rows()
    expected, late = simulate(data, 1000, 100, 100)
    assert late  # the bound is tight enough that some rows are late
    env = StreamExecutionEnvironment(parallelism=1, spark=spark, checkpoint_dir=str(tmp_path))
    stream = env.from_arrow(data, batch_size=1000, watermark_strategy=WatermarkStrategy("ts", 100))
    tag = OutputTag("late", data.schema)
    windows = stream.key_by("k").window(TumblingEventTimeWindows.of(100)).side_output_late_data(tag)
    if batch_level:
        window_out = windows.aggregate_columns({"n": ("ts", "count")}, name="counts")
        counted = window_out.map_batch(
            lambda b: b.rename_columns(["k", "start", "end", "n"]).drop_columns(["end"]),
            name="rename",
        )
    else:
        window_out = counted = windows.aggregate(CountRows(), KeyAndWindow(), name="counts")
    counted.sink_to(CollectSink("counts"), name="counts-out")
    window_out.get_side_output(tag).sink_to(CollectSink("late"), name="late-out")
    result = env.execute(f"late-{batch_level}")
    assert as_set(result.collected["counts-out"]) == expected
    assert result.collected["counts-out"].num_rows == len(expected)
    assert sorted(result.collected["late-out"].column("ts").to_pylist()) == late


@pytest.mark.slow
def test_at_parallelism_2_every_row_is_in_its_window_or_in_the_late_output(
    spark: Any, tmp_path: Path
) -> None:
    data = out_of_order_rows()
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    stream = env.from_arrow(data, batch_size=100, watermark_strategy=WatermarkStrategy("ts", 50))
    tag = OutputTag("late", data.schema)
    windows = stream.key_by("k").window(TumblingEventTimeWindows.of(100))
    counted = windows.side_output_late_data(tag).aggregate(CountRows(), KeyAndWindow())
    counted.sink_to(CollectSink("counts"), name="counts-out")
    counted.get_side_output(tag).sink_to(CollectSink("late"), name="late-out")
    result = env.execute("late-p2")
    late = result.collected["late-out"]
    # which rows are late depends on how the channels interleave; whatever they are,
    # the windows must count exactly the other rows (a numpy group-by of them)
    assert late.num_rows > 0  # a 50 ms bound at parallelism 2 makes some rows late
    late_rows = sorted(zip(*(late.column(c).to_pylist() for c in ("k", "ts")), strict=True))
    everything = sorted(zip(*(data.column(c).to_pylist() for c in ("k", "ts")), strict=True))
    remaining = list(everything)
    for row in late_rows:
        remaining.remove(row)  # each late row is a real row, once
    counts: dict[tuple[int, int], int] = {}
    for k, ts in remaining:
        start = int(np.floor_divide(ts, 100) * 100)
        counts[(k, start)] = counts.get((k, start), 0) + 1
    assert as_set(result.collected["counts-out"]) == {(k, s, n) for (k, s), n in counts.items()}
