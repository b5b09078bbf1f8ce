"""Batch-level event-time session windows (``aggregate_columns`` over
EventTimeSessionWindows) equal the per-record session windows with an AggregateFunction
on seeded random input: sessions merging across batches, keys interleaved, late rows,
and a checkpoint restored at the same and at another parallelism."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from flintlock import (
    EventTimeSessionWindows,
    EventTimeTrigger,
    GraphError,
    OutputTag,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from flintlock.core.api.keys import ColumnKey, ColumnsKey
from flintlock.core.api.window_functions import AggregateContents
from flintlock.core.exchange.key_groups import key_group_of, subtask_for_key_group
from flintlock.core.state.aggregate import AggregateFunction
from flintlock.operators.window_sessions import SessionWindowAggregateOperator
from flintlock.operators.windows import WindowOperator
from flintlock.testing import OneInputHarness

GAP = 20
AGGREGATES = {
    "n": ("v", "count"),
    "total": ("v", "sum"),
    "low": ("v", "min"),
    "high": ("v", "max"),
    "mean": ("v", "mean"),
}
Step = tuple[pa.Table, int]
"""One batch of rows, then the watermark sent after it."""


class Stats(AggregateFunction):
    """count, sum, min, max and mean of ``v``, row by row."""

    def create_accumulator(self) -> tuple[int, int, int, int]:
        return 0, 0, 10**9, -(10**9)

    def add(self, value: dict[str, Any], acc: tuple[int, int, int, int]) -> Any:
        v = value["v"]
        return acc[0] + 1, acc[1] + v, min(acc[2], v), max(acc[3], v)

    def get_result(self, acc: tuple[int, int, int, int]) -> dict[str, Any]:
        n, total, low, high = acc
        return {"n": n, "total": total, "low": low, "high": high, "mean": total / n}

    def merge(self, a: Any, b: Any) -> Any:
        return a[0] + b[0], a[1] + b[1], min(a[2], b[2]), max(a[3], b[3])


class Session(ProcessWindowFunction):
    """The key's columns, the session's bounds and its stats as one row."""

    def __init__(self, key_names: list[str]) -> None:
        self.key_names = key_names

    def process(self, key: Any, context: Any, elements: list[Any], out: Any) -> None:
        parts = key if isinstance(key, tuple) else (key,)
        window = context.window
        out.collect(
            dict(zip(self.key_names, parts, strict=True))
            | {"window_start": window.start, "window_end": window.end, **elements[0]}
        )


def key_of(names: list[str]) -> Any:
    return ColumnKey(names[0]) if len(names) == 1 else ColumnsKey(names)


def batch_operator(names: list[str], late: OutputTag | None = None) -> Any:
    assigner = EventTimeSessionWindows.with_gap(GAP)
    return SessionWindowAggregateOperator(
        assigner, AGGREGATES, key_of(names), "ts", name="sessions", late_tag=late
    )


def per_record_operator(names: list[str]) -> WindowOperator:
    contents = AggregateContents(Stats(), Session(names))
    return WindowOperator(
        EventTimeSessionWindows.with_gap(GAP), contents, key_of(names), "ts", name="w"
    )


def random_steps(seed: int, batches: int = 8, rows: int = 200, keys: int = 30) -> list[Step]:
    """Rows of interleaved keys over a moving span of event time, some of them late;
    each batch in descending event time, so the per-record operator meets a row's later
    neighbours of the same batch before it, as the batch-level one (which takes a batch
    as a set) does."""
    rng = np.random.default_rng(seed)
    steps: list[Step] = []
    for i in range(batches):
        base = i * 150
        ts = base + rng.integers(-120, 200, rows)  # some well behind the watermark: late
        k = rng.integers(0, keys, rows)
        table = pa.table(
            {
                "k": k,
                "g": pa.array(np.where(k % 2, "odd", "even")),
                "ts": ts,
                "v": rng.integers(-50, 100, rows),
            }
        )
        table = table.take(pa.array(np.argsort(-ts, kind="stable")))
        steps.append((table, base + 60))
    return steps


def run(harness: OneInputHarness, steps: list[Step], names: list[str], end: bool = True) -> None:
    for table, watermark in steps:
        harness.process_records(table.to_pylist(), schema=table.schema)
        harness.process_watermark(watermark)
    if end:
        harness.end_input()


def spanning_batches(rows: list[dict[str, Any]], steps: list[Step], names: list[str]) -> int:
    """How many sessions hold rows of more than one batch."""
    stamps: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    for i, (table, _) in enumerate(steps):
        for r in table.to_pylist():
            stamps.setdefault(tuple(r[n] for n in names), []).append((r["ts"], i))
    count = 0
    for row in rows:
        batches = {
            i
            for ts, i in stamps[tuple(row[n] for n in names)]
            if row["window_start"] <= ts < row["window_end"] - GAP + 1
        }
        count += len(batches) > 1
    return count


def sessions(rows: list[dict[str, Any]], names: list[str]) -> list[tuple[Any, ...]]:
    columns = [*names, "window_start", "window_end", *AGGREGATES]
    return sorted(tuple(row[c] for c in columns) for row in rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("names", [["k"], ["g", "k"]])
def test_sessions_equal_the_per_record_session_windows(seed: int, names: list[str]) -> None:
    steps = random_steps(seed)
    fast, slow = batch_operator(names), per_record_operator(names)
    fast_harness, slow_harness = OneInputHarness(fast), OneInputHarness(slow)
    run(fast_harness, steps, names)
    run(slow_harness, steps, names)
    got = fast_harness.output_rows()
    assert sessions(got, names) == sessions(slow_harness.output_rows(), names)
    assert fast.late_records_dropped == slow.late_records_dropped > 0
    assert spanning_batches(got, steps, names)  # sessions that merged rows of batches
    # each watermark's sessions come ordered by start, then key
    starts = [(row["window_start"], *(row[n] for n in names)) for row in got]
    assert len(starts) == len(set(starts))


def test_sessions_merge_touch_fire_at_end_minus_one_and_drop_late_rows() -> None:
    op = batch_operator(["k"])
    harness = OneInputHarness(op)
    harness.process_records([{"k": 1, "ts": 0, "v": 1}, {"k": 2, "ts": 40, "v": 5}])
    harness.process_records([{"k": 1, "ts": 40, "v": 2}])  # [0, 20) and [40, 60): apart
    harness.process_records([{"k": 1, "ts": 20, "v": 3}])  # touches both: one session
    harness.process_watermark(58)
    assert harness.output_rows() == []
    harness.process_watermark(59)  # end - 1 of [0, 60) and of k=2's [40, 60)
    assert [
        (r["k"], r["window_start"], r["window_end"], r["n"]) for r in harness.output_rows()
    ] == [
        (1, 0, 60, 3),
        (2, 40, 60, 1),
    ]
    harness.process_records([{"k": 1, "ts": 65, "v": 4}])
    harness.process_records(
        [
            {"k": 1, "ts": 25, "v": 7},  # [25, 45) passed the watermark: late
            {"k": 1, "ts": 50, "v": 8},  # its own session passed, but it joins [65, 85)
        ]
    )
    harness.end_input()
    assert [
        (r["window_start"], r["window_end"], r["total"]) for r in harness.output_rows()[2:]
    ] == [(50, 85, 12)]
    assert op.late_records_dropped == 1


def test_late_rows_go_to_the_late_side_output() -> None:
    tag = OutputTag("late")
    harness = OneInputHarness(batch_operator(["k"], late=tag))
    harness.process_records([{"k": 1, "ts": 100, "v": 1}])
    harness.process_watermark(200)
    harness.process_records([{"k": 1, "ts": 150, "v": 2}, {"k": 3, "ts": 300, "v": 3}])
    harness.end_input()
    assert harness.side_output_rows(tag) == [{"k": 1, "ts": 150, "v": 2}]
    assert [r["window_start"] for r in harness.output_rows()] == [100, 300]


@pytest.mark.parametrize("parallelism", [1, 2])
def test_open_sessions_survive_a_checkpoint_and_restore(parallelism: int) -> None:
    names = ["k"]
    steps = random_steps(5)
    first, second = steps[:4], steps[4:]
    slow = OneInputHarness(per_record_operator(names))
    run(slow, steps, names)
    start = OneInputHarness(batch_operator(names))
    run(start, first, names, end=False)
    rows = list(start.output_rows())
    snapshot = start.checkpoint(1)
    late, resumed = 0, []
    for subtask in range(parallelism):  # each subtask restores the key groups it owns
        op = batch_operator(names)
        restored = OneInputHarness(
            op, restore_from=snapshot, parallelism=parallelism, subtask_index=subtask
        )
        restored.process_watermark(first[-1][1])  # a watermark is not part of a snapshot
        mine = [
            (table.filter(pa.array(owners(table, parallelism) == subtask)), watermark)
            for table, watermark in second
        ]
        run(restored, mine, names)
        rows.extend(restored.output_rows())
        resumed.extend(restored.output_rows())
        late += op.late_records_dropped
    assert sessions(rows, names) == sessions(slow.output_rows(), names)
    halves = [(pa.concat_tables([t for t, _ in part]), 0) for part in (first, second)]
    assert spanning_batches(resumed, halves, names)  # open at the checkpoint, merged on
    assert late > 0


def owners(table: pa.Table, parallelism: int) -> np.ndarray:
    return np.array(
        [
            subtask_for_key_group(key_group_of(k, 128), parallelism, 128)
            for k in table.column("k").to_pylist()
        ]
    )


def test_aggregate_columns_takes_session_windows_without_pre_aggregation() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    table = pa.table({"k": [1, 1], "ts": [0, 5], "v": [1, 2]})
    stream = env.from_arrow(table, watermark_strategy=WatermarkStrategy("ts", 0))
    windows = stream.key_by("k").window(EventTimeSessionWindows.with_gap(GAP))
    fired = windows.aggregate_columns({"n": ("v", "count")}, name="s")
    operator = fired.transformation.make_operator()
    assert isinstance(operator, SessionWindowAggregateOperator) and operator.gap == GAP
    assert not any("preaggregate" in t.name for t in env.transformations)
    with pytest.raises(GraphError, match="'x' aggregates column 'nope', which is not in"):
        windows.aggregate_columns({"x": ("nope", "sum")})
    with pytest.raises(GraphError, match="uses 'median'; use one of"):
        windows.aggregate_columns({"x": ("v", "median")})
    triggered = stream.key_by("k").window(EventTimeSessionWindows.with_gap(GAP))
    with pytest.raises(GraphError, match="takes the default trigger"):
        triggered.trigger(EventTimeTrigger()).aggregate_columns({"n": ("v", "count")})
