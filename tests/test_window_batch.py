"""Batch-level window aggregation equals numpy/plain-Python references, fires on the
watermark, drops late rows, and survives checkpoint, restore and rescale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from flintlock import (
    GraphError,
    SlidingEventTimeWindows,
    StreamExecutionEnvironment,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from flintlock.core.api.keys import ColumnKey, ColumnsKey
from flintlock.core.exchange.key_groups import key_group_of, subtask_for_key_group
from flintlock.operators.window_batch import BatchWindowAggregateOperator
from flintlock.testing import OneInputHarness

AGGREGATES = {
    "n": ("v", "count"),
    "total": ("v", "sum"),
    "low": ("v", "min"),
    "high": ("v", "max"),
    "mean": ("v", "mean"),
}


def data(n: int = 5000, keys: int = 13) -> pa.Table:
    i = np.arange(n, dtype=np.int64)
    return pa.table({"k": i % keys, "ts": i - ((i * 7919) % 500), "v": (i * 31) % 97})


def reference(table: pa.Table, size: int, slide: int) -> dict[tuple[int, int], tuple[Any, ...]]:
    """Plain Python: every (key, window start) with count, sum, min, max, mean of v."""
    windows: dict[tuple[int, int], list[int]] = {}
    for k, ts, v in zip(*(table.column(c).to_pylist() for c in ("k", "ts", "v")), strict=True):
        start = ts - ts % slide
        while start > ts - size:
            windows.setdefault((k, start), []).append(v)
            start -= slide
    return {w: (len(vs), sum(vs), min(vs), max(vs), sum(vs) / len(vs)) for w, vs in windows.items()}


def as_dict(rows: list[dict[str, Any]]) -> dict[tuple[int, int], tuple[Any, ...]]:
    return {
        (r["k"], r["window_start"]): (r["n"], r["total"], r["low"], r["high"], r["mean"])
        for r in rows
    }


def operator(assigner: Any, key: Any = None) -> BatchWindowAggregateOperator:
    return BatchWindowAggregateOperator(
        assigner, AGGREGATES, key or ColumnKey("k"), "ts", name="agg"
    )


@pytest.mark.parametrize(
    "assigner, size, slide",
    [(TumblingEventTimeWindows.of(100), 100, 100), (SlidingEventTimeWindows.of(100, 25), 100, 25)],
)
def test_column_aggregates_equal_plain_python(assigner: Any, size: int, slide: int) -> None:
    table = data()
    harness = OneInputHarness(operator(assigner))
    for batch in table.to_batches(max_chunksize=700):
        harness.process_batch(batch)
    harness.end_input()
    rows = harness.output_rows()
    assert as_dict(rows) == reference(table, size, slide)
    assert len(rows) == len(as_dict(rows))  # each window once
    for row in rows:
        assert row["window_end"] == row["window_start"] + size


def test_windows_fire_when_the_watermark_passes_and_late_rows_are_dropped() -> None:
    op = operator(TumblingEventTimeWindows.of(10))
    harness = OneInputHarness(op)
    harness.process_records([{"k": 1, "ts": 3, "v": 1}, {"k": 1, "ts": 12, "v": 2}])
    harness.process_watermark(9)
    assert [(r["window_start"], r["n"]) for r in harness.output_rows()] == [(0, 1)]
    harness.process_records([{"k": 1, "ts": 5, "v": 3}])  # its window fired: late
    harness.end_input()
    assert [(r["window_start"], r["n"]) for r in harness.output_rows()] == [(0, 1), (10, 1)]
    assert op.late_records_dropped == 1


def test_open_windows_survive_restore_with_another_parallelism() -> None:
    table = data(3000, keys=7)
    first, second = table.slice(0, 1500), table.slice(1500)
    start = OneInputHarness(operator(TumblingEventTimeWindows.of(100)))
    start.process_batch(first)
    start.process_watermark(200)
    fired_before = start.output_rows()
    snapshot = start.checkpoint(1)
    rows = list(fired_before)
    for subtask in range(2):  # rescale 1 -> 2: each subtask restores its key groups
        restored = OneInputHarness(
            operator(TumblingEventTimeWindows.of(100)),
            restore_from=snapshot,
            parallelism=2,
            subtask_index=subtask,
        )
        mine = [
            row
            for row in second.to_pylist()
            if subtask_for_key_group(key_group_of(row["k"], 128), 2, 128) == subtask
        ]
        restored.process_records(mine, schema=table.schema)
        restored.end_input()
        rows.extend(restored.output_rows())
    assert as_dict(rows) == reference(table, 100, 100)
    assert len(rows) == len(as_dict(rows))


def test_multi_column_keys() -> None:
    table = data(2000).append_column("g", pa.array(np.arange(2000) % 2))
    harness = OneInputHarness(
        BatchWindowAggregateOperator(
            TumblingEventTimeWindows.of(100), {"n": ("v", "count")}, ColumnsKey(["k", "g"]), "ts"
        )
    )
    harness.process_batch(table)
    harness.end_input()
    got = {(r["k"], r["g"], r["window_start"]): r["n"] for r in harness.output_rows()}
    expected: dict[tuple[int, int, int], int] = {}
    for k, g, ts in zip(*(table.column(c).to_pylist() for c in ("k", "g", "ts")), strict=True):
        key = (k, g, ts - ts % 100)
        expected[key] = expected.get(key, 0) + 1
    assert got == expected


def test_bad_aggregates_are_refused_before_spark_starts() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    stream = env.from_arrow(data(10), watermark_strategy=WatermarkStrategy("ts", 0))
    windows = stream.key_by("k").window(TumblingEventTimeWindows.of(10))
    with pytest.raises(GraphError, match="'x' aggregates column 'nope', which is not in"):
        windows.aggregate_columns({"x": ("nope", "sum")})
    with pytest.raises(GraphError, match="uses 'median'; use one of"):
        windows.aggregate_columns({"x": ("v", "median")})
    sliding = stream.key_by("k").window(SlidingEventTimeWindows.of(10, 3))
    with pytest.raises(GraphError, match="size \\(10\\) must be a multiple of its slide \\(3\\)"):
        sliding.aggregate_columns({"x": ("v", "sum")})


@pytest.mark.slow
@pytest.mark.parametrize("parallelism", [1, 2])
def test_on_spark_equal_to_plain_python(spark: Any, tmp_path: Path, parallelism: int) -> None:
    table = data(20_000, keys=50)
    env = StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=str(tmp_path)
    )
    stream = env.from_arrow(table, batch_size=2000, watermark_strategy=WatermarkStrategy("ts", 500))
    windows = stream.key_by("k").window(TumblingEventTimeWindows.of(1000))
    got = windows.aggregate_columns(AGGREGATES).execute_and_collect(f"batch-windows-{parallelism}")
    rows = got.to_pylist()
    assert as_dict(rows) == reference(table, 1000, 1000)
    assert len(rows) == len(as_dict(rows))
