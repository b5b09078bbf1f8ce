"""Two-phase aggregate_columns on Spark: a job of several epochs, stopped after one and
resumed from its checkpoint in the other plan, gives the one-phase plan's windows and
late count, both equal to pyarrow computing the windows of the on-time rows directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from flintlock import (
    EpochTrigger,
    SlidingEventTimeWindows,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from flintlock.core.sources.sequence import SequenceSource
from flintlock.sinks.collect import CollectSink

pytestmark = pytest.mark.slow

END, PER_EPOCH, BATCH = 3000, 1000, 100
SIZE, SLIDE = 200, 50
AGGREGATES = {
    "n": ("v", "count"),
    "total": ("v", "sum"),
    "low": ("v", "min"),
    "mean": ("v", "mean"),
}


def with_columns(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Keys, a value and an event time from the id: out of order by < 50 ms (within the
    watermark's 100 ms); every 23rd row 3 s late, except in an epoch's first batch,
    where the watermark (reset at each epoch's start) has not moved yet."""
    ids = batch.column("id").to_numpy()
    ts = ids - (ids * 7919) % 50
    late = (ids % 23 == 5) & (ids % PER_EPOCH >= BATCH)
    ts = np.where(late, ids - 3000, ts)
    return pa.RecordBatch.from_pydict(
        {"k": ids % 7, "g": (ids // 5) % 3, "ts": ts, "v": (ids * 31) % 97}
    )


def windows_of(table: pa.Table) -> pa.Table:
    """pyarrow: every sliding window's count, sum, min and mean of ``v`` per key."""
    ts = table.column("ts").to_numpy()
    copies = [
        table.append_column("window_start", pa.array(ts // SLIDE * SLIDE - i * SLIDE))
        for i in range(SIZE // SLIDE)
    ]
    grouped = (
        pa.concat_tables(copies)
        .group_by(["k", "g", "window_start"])
        .aggregate([("v", "count"), ("v", "sum"), ("v", "min"), ("v", "mean")])
    )
    return grouped.rename_columns(
        {"v_count": "n", "v_sum": "total", "v_min": "low", "v_mean": "mean"}
    )


def reference() -> tuple[pa.Table, int]:
    """pyarrow: the sliding windows of the on-time rows, and the late rows' count."""
    rows = with_columns(pa.RecordBatch.from_pydict({"id": np.arange(END)}))
    ids = np.arange(END)
    late = (ids % 23 == 5) & (ids % PER_EPOCH >= BATCH)
    return windows_of(pa.Table.from_batches([rows]).filter(pa.array(~late))), int(late.sum())


def run(spark: Any, base: Path, pre: bool, trigger: EpochTrigger) -> Any:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(base))
    source = SequenceSource(None, END, 0, PER_EPOCH, batch_size=BATCH)
    (
        env.from_source(source)
        .set_parallelism(1)
        .map_batch(with_columns, name="columns")
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(WatermarkStrategy("ts", 100))
        .set_parallelism(1)
        .key_by(["k", "g"])
        .window(SlidingEventTimeWindows.of(SIZE, SLIDE))
        .aggregate_columns(AGGREGATES, pre_aggregate=pre)
        .sink_to(CollectSink("out"), name="out")
    )
    return env.execute("windows", trigger=trigger)


def late_count(result: Any) -> int:
    return sum(
        operator["user"].get("counters", {}).get("numLateRecordsDropped", 0)
        for epoch in result.metrics["epochs"]
        for vertex in epoch["vertices"].values()
        for operator in vertex["operators"].values()
        if "user" in operator
    )


def test_two_phase_equals_one_phase_and_pyarrow(spark: Any, tmp_path: Path) -> None:
    """Two runs of the job, each stopped after its first epoch and resumed from that
    checkpoint in the other plan: epoch by epoch the plans' outputs are equal, and the
    whole equals pyarrow's windows of the on-time rows (and the late count)."""
    expected, late = reference()
    runs = {}
    for first_pre in (False, True):
        base = tmp_path / f"first-pre-{first_pre}"
        first = run(spark, base, first_pre, EpochTrigger.once())  # one epoch, then stop
        rest = run(spark, base, not first_pre, EpochTrigger.available_now())  # to the end
        assert (first.epochs, rest.epochs) == (1, 2)
        for result, pre in ((first, first_pre), (rest, not first_pre)):
            vertices = result.metrics["epochs"][0]["vertices"]
            chained = "window_aggregate-preaggregate" if pre else "timestamps_watermarks"
            assert any(v.endswith(f"-> {chained}") for v in vertices), vertices
        assert late_count(first) + late_count(rest) == late
        runs[first_pre] = (first.collected["out"], rest.collected["out"])
    for one, two in zip(runs[False], runs[True], strict=True):
        assert one.num_rows and one.equals(two)
    got = pa.concat_tables(runs[True]).drop_columns(["window_end"])
    order = [("k", "ascending"), ("g", "ascending"), ("window_start", "ascending")]
    assert got.sort_by(order).equals(expected.select(got.column_names).sort_by(order))


def test_a_source_feeding_two_operators_sends_the_window_its_rows(
    spark: Any, tmp_path: Path
) -> None:
    """The pre-aggregation could not chain to a source that feeds another operator too:
    it is left out and the window (expecting partials) takes the rows themselves."""
    rows = with_columns(pa.RecordBatch.from_pydict({"id": np.arange(2000)}))
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    stream = env.from_arrow(
        pa.Table.from_batches([rows]),
        batch_size=250,
        watermark_strategy=WatermarkStrategy("ts", 10**6),
    )
    stream.key_by(["k", "g"]).window(SlidingEventTimeWindows.of(SIZE, SLIDE)).aggregate_columns(
        AGGREGATES
    ).sink_to(CollectSink("out"), name="out")
    stream.sink_to(CollectSink("rows"), name="rows")
    result = env.execute("two-readers")
    vertices = sorted(result.metrics["epochs"][0]["vertices"])
    assert vertices == ["rows", "source:collection", "window_aggregate -> out"]
    assert result.collected["rows"].num_rows == 2000
    got = result.collected["out"].drop_columns(["window_end"])
    expected = windows_of(pa.Table.from_batches([rows]))
    order = [("k", "ascending"), ("g", "ascending"), ("window_start", "ascending")]
    assert got.sort_by(order).equals(expected.select(got.column_names).sort_by(order))
