"""Event time on Spark: out-of-order rows (ts = i - ((i*7919) % 500)) through a keyed
process function whose event-time timers close 1000-unit windows, against a plain-Python
reference at parallelism 1 and 2; late rows routed to a side output; watermark
strategies at from_collection, mid-stream, from_dataframe and from_parquet."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flintlock import (
    CollectSink,
    KeyedProcessFunction,
    ListStateDescriptor,
    OutputTag,
    StreamExecutionEnvironment,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
    WatermarkStrategy,
)

N = 6000
WINDOW = 1000
KEYS = 7
LATE = OutputTag("late", pa.schema([("k", pa.int64()), ("ts", pa.int64())]))
WINDOWS = pa.schema(
    [("k", pa.int64()), ("window_end", pa.int64()), ("count", pa.int64()), ("ts_sum", pa.int64())]
)


def window_end(ts: int) -> int:
    return ts - ts % WINDOW + WINDOW - 1


class WindowCount(KeyedProcessFunction):
    """Counts a key's rows per event-time window; a timer at the window's end emits it.
    Rows at or behind the watermark are late: they go to the LATE side output."""

    output_schema = WINDOWS

    def open(self) -> None:
        descriptor = ListStateDescriptor("pending", pa.int64())
        self.pending = self.runtime_context.get_list_state(descriptor)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        ts = ctx.timestamp()
        if ts <= ctx.timer_service().current_watermark():
            ctx.output(LATE, {"k": value["k"], "ts": ts})
            return
        self.pending.add(ts)
        ctx.timer_service().register_event_time_timer(window_end(ts))

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        stamps = self.pending.get()
        mine = [t for t in stamps if window_end(t) == timestamp]
        self.pending.update([t for t in stamps if window_end(t) != timestamp])
        out.collect(
            {
                "k": ctx.get_current_key(),
                "window_end": timestamp,
                "count": len(mine),
                "ts_sum": sum(mine),
            }
        )


def rows(base: int = 0) -> list[dict[str, int]]:
    return [{"k": i % KEYS, "ts": base + i - ((i * 7919) % 500)} for i in range(N)]


def reference(
    data: list[dict[str, int]], late: frozenset[int] = frozenset()
) -> list[tuple[int, ...]]:
    """(k, window_end, count, ts_sum) of the rows whose index is not in ``late``."""
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, row in enumerate(data):
        if index not in late:
            groups[(row["k"], window_end(row["ts"]))].append(row["ts"])
    return sorted((k, end, len(ts), sum(ts)) for (k, end), ts in groups.items())


def late_rows_at_parallelism_1(data: list[dict[str, int]], batch: int, delay: int) -> set[int]:
    """Which rows a single channel delivers behind the watermark: the watermark after a
    batch is max(ts so far) - delay - 1, and rows of the next batch at or below it are late."""
    late, highest = set(), None
    for start in range(0, len(data), batch):
        watermark = None if highest is None else highest - delay - 1
        for index in range(start, min(start + batch, len(data))):
            if watermark is not None and data[index]["ts"] <= watermark:
                late.add(index)
        batch_max = max(r["ts"] for r in data[start : start + batch])
        highest = batch_max if highest is None else max(highest, batch_max)
    return late


def run(
    stream: Any, env: StreamExecutionEnvironment
) -> tuple[list[tuple[int, ...]], list[dict[str, int]]]:
    counted = stream.key_by("k").process(WindowCount(), name="windows")
    counted.sink_to(CollectSink(name="counts"), name="counts")
    counted.get_side_output(LATE).sink_to(CollectSink(name="late"), name="late")
    result = env.execute("event-time")
    counts = result.collected["counts"].to_pylist()
    late = result.collected["late"].to_pylist() if result.collected["late"].num_rows else []
    return sorted(tuple(r[c] for c in WINDOWS.names) for r in counts), late


def test_late_rows_go_to_the_side_output_at_parallelism_1(spark: Any) -> None:
    data = rows()
    env = StreamExecutionEnvironment(parallelism=1, spark=spark)
    stream = env.from_collection(
        data, batch_size=500, watermark_strategy=WatermarkStrategy("ts", 100)
    )
    counts, late = run(stream, env)
    expected_late = late_rows_at_parallelism_1(data, 500, 100)
    assert expected_late  # the data really is out of order beyond 100
    assert counts == reference(data, frozenset(expected_late))
    assert sorted((r["k"], r["ts"]) for r in late) == sorted(
        (data[i]["k"], data[i]["ts"]) for i in expected_late
    )


def test_windows_by_timers_equal_the_reference_at_parallelism_2(spark: Any) -> None:
    data = rows()
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    stream = env.from_collection(data, batch_size=500).assign_timestamps_and_watermarks(
        WatermarkStrategy("ts", 500)  # bounded by the data's disorder: nothing is late
    )
    counts, late = run(stream, env)
    assert late == []
    assert counts == reference(data)


def test_with_late_rows_at_parallelism_2_every_row_is_counted_or_late(spark: Any) -> None:
    data = rows()
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    stream = env.from_collection(
        data, batch_size=300, watermark_strategy=WatermarkStrategy("ts", 50)
    )
    counts, late = run(stream, env)
    assert late  # channels interleave, so which rows are late varies; their sum does not
    counted = Counter({(k, end): n for k, end, n, _ in counts})
    counted.update(Counter((r["k"], window_end(r["ts"])) for r in late))
    assert counted == Counter((r["k"], window_end(r["ts"])) for r in data)


def test_from_dataframe_takes_a_watermark_strategy(spark: Any) -> None:
    frame = spark.range(0, N, 1, 2).selectExpr(
        f"id % {KEYS} AS k", "id - ((id * 7919) % 500) AS ts"
    )
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    stream = env.from_dataframe(frame, watermark_strategy=WatermarkStrategy("ts", 500))
    counts, late = run(stream, env)
    assert late == []
    assert counts == reference(rows())


def test_from_parquet_with_a_timestamp_column(spark: Any, tmp_path: Path) -> None:
    base = 1_700_000_000_000  # epoch ms
    data = rows(base)
    table = pa.table(
        {
            "k": pa.array([r["k"] for r in data], pa.int64()),
            "at": pa.array([r["ts"] for r in data], pa.timestamp("ms")),
        }
    )
    for part in range(3):
        pq.write_table(table.slice(part * 2000, 2000), tmp_path / f"part-{part}.parquet")

    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    strategy = WatermarkStrategy("at", timedelta(milliseconds=500))
    stream = env.from_parquet(str(tmp_path), batch_size=1000, watermark_strategy=strategy)
    counted = stream.key_by("k").process(WindowCount(), name="windows")
    counted.sink_to(CollectSink(name="counts"), name="counts")
    result = env.execute("parquet-event-time")
    counts = sorted(
        tuple(r[c] for c in WINDOWS.names) for r in result.collected["counts"].to_pylist()
    )
    assert counts == reference(data)


@pytest.mark.parametrize("bad", ["id", "missing"])
def test_a_strategy_column_that_does_not_fit_is_refused_when_the_source_is_defined(
    spark: Any, bad: str
) -> None:
    from flintlock import EventTimeError

    frame = spark.range(0, 10).selectExpr("id", "cast(id as string) AS name")
    env = StreamExecutionEnvironment(parallelism=1, spark=spark)
    column = "name" if bad == "id" else "nope"
    with pytest.raises(EventTimeError, match=f"timestamp column '{column}'"):
        env.from_dataframe(frame, watermark_strategy=WatermarkStrategy(column))


def test_processing_time_timers_fire_on_the_wall_clock(spark: Any) -> None:
    class FirstSeen(KeyedProcessFunction):
        """On a key's first row, a processing-time timer due now: it fires after the batch."""

        output_schema = pa.schema([("k", pa.int64()), ("domain", pa.string())])

        def open(self) -> None:
            descriptor = ListStateDescriptor("seen", pa.int64())
            self.seen = self.runtime_context.get_list_state(descriptor)

        def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            if not self.seen.get():
                self.seen.add(1)
                timers = ctx.timer_service()
                timers.register_processing_time_timer(timers.current_processing_time())

        def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
            out.collect({"k": ctx.get_current_key(), "domain": ctx.time_domain().value})

    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    fired = env.from_collection(rows(), batch_size=500).key_by("k").process(FirstSeen()).collect()
    assert sorted(fired.column("k").to_pylist()) == list(range(KEYS))  # each key once
    assert set(fired.column("domain").to_pylist()) == {"processing_time"}


class CountWindows(KeyedProcessFunction):
    """Numbers each key's fired windows (keyed state), downstream of a window."""

    output_schema = pa.schema([("k", pa.int64()), ("window_start", pa.int64()), ("n", pa.int64())])

    def open(self) -> None:
        self.seen = self.runtime_context.get_state(ValueStateDescriptor("n", pa.int64(), default=0))

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.seen.update(self.seen.value() + 1)
        out.collect(
            {"k": value["k"], "window_start": value["window_start"], "n": self.seen.value()}
        )


def test_a_keyed_process_function_after_window_columns_sees_the_fired_windows(
    spark: Any,
) -> None:
    """The fired windows have no ``ts`` column: downstream operators read no event time
    from it (they failed on every batch: "event-time column 'ts' is not in the batch")."""
    data = [{"k": i % 2, "ts": i * 100} for i in range(40)]  # windows of 1000: 5 per key
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    windows = (
        env.from_collection(data, watermark_strategy=WatermarkStrategy("ts", 0))
        .key_by("k")
        .window(TumblingEventTimeWindows.of(WINDOW))
        .aggregate_columns({"rows": ("ts", "count")})
    )
    numbered = windows.key_by("k").process(CountWindows()).collect()
    seen = sorted((r["k"], r["window_start"], r["n"]) for r in numbered.to_pylist())
    assert seen == [
        (k, start, start // WINDOW + 1) for k in (0, 1) for start in range(0, 4000, 1000)
    ]
