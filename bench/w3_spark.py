"""W3b on Spark: flintlock's batch-level window job, one-phase and two-phase (a local
pre-aggregation before the keyed exchange), against Spark SQL's groupBy(window) over the
same DataFrame, in one session, interleaved (``python bench/w3.py --spark``)."""

from __future__ import annotations

import tempfile
from typing import Any

import pyarrow as pa
from timing import local_session, timed

from flintlock import StreamExecutionEnvironment, TumblingEventTimeWindows, WatermarkStrategy

SIZE = 1000
ONE = "flintlock aggregate_columns one-phase"
TWO = "flintlock aggregate_columns two-phase"
OUT_OF_ORDERNESS = 500


def w3b_frame(spark: Any, rows: int, keys: int, rows_per_ms: int = 10) -> Any:
    """W3b's rows (about ten per key and window, up to 499 ms out of order; W3's with
    ``rows_per_ms=1``: about one), 2 partitions, cached so neither side pays for
    generating them."""
    frame = spark.range(rows, numPartitions=2).selectExpr(
        f"id % {keys} AS k", f"id DIV {rows_per_ms} - ((id * 7919) % 500) AS ts"
    )
    frame = frame.cache()
    frame.count()
    return frame


def flintlock_counts(spark: Any, frame: Any, scratch: str, pre: bool) -> pa.Table:
    """The job in a fresh checkpoint folder (one that ran would answer from its results);
    ``pre``: two-phase (``pre_aggregate=True``)."""
    folder = tempfile.mkdtemp(dir=scratch)
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=folder)
    strategy = WatermarkStrategy("ts", max_out_of_orderness=OUT_OF_ORDERNESS)
    return (
        env.from_dataframe(frame, watermark_strategy=strategy)
        .key_by("k")
        .window(TumblingEventTimeWindows.of(SIZE))
        .aggregate_columns({"n": ("ts", "count")}, pre_aggregate=pre)
        .execute_and_collect("w3b")
    )


def spark_sql_counts(frame: Any) -> pa.Table:
    from pyspark.sql import functions as F

    windowed = frame.groupBy(F.window(F.timestamp_millis("ts"), "1 second"), "k").count()
    return windowed.select(
        "k", F.unix_millis("window.start").alias("window_start"), F.col("count").alias("n")
    ).toArrow()


def counts(table: pa.Table) -> dict[tuple[int, int], int]:
    columns = (table.column(c).to_pylist() for c in ("k", "window_start", "n"))
    return {(k, s): n for k, s, n in zip(*columns, strict=True)}


def spark_w3b(rows: int, keys: int, runs: int, label: str = "W3b") -> None:
    spark = local_session(driver_memory="4g")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    frame = w3b_frame(spark, rows, keys, 10 if label == "W3b" else 1)
    with tempfile.TemporaryDirectory() as scratch:
        for pre in (False, True):  # warm all: workers, JIT, caches
            flintlock_counts(spark, frame, scratch, pre)
        spark_sql_counts(frame)
        figures = timed(
            runs,
            {
                "Spark SQL groupBy(window) (baseline)": lambda: spark_sql_counts(frame),
                ONE: lambda: flintlock_counts(spark, frame, scratch, False),
                TWO: lambda: flintlock_counts(spark, frame, scratch, True),
            },
        )
    base_seconds, base = figures["Spark SQL groupBy(window) (baseline)"]
    reference = counts(base)
    print(f"{label} on Spark local[2]: {rows:,} rows, {keys:,} keys, {len(reference):,} windows")
    print(f"  {'variant':<40}{'seconds':>9}{'M rows/s':>10}{'time vs SQL':>13}  result")
    for name, (seconds, output) in figures.items():
        got = counts(output)
        check = "equal" if got == reference else "MISMATCH"
        total = sum(got.values())
        print(
            f"  {name:<40}{seconds:>9.3f}{rows / seconds / 1e6:>10.2f}"
            f"{seconds / base_seconds:>12.2f}x  {check} ({rows - total:,} rows late)"
        )
    same = figures[ONE][1].equals(figures[TWO][1])
    print(f"  two-phase output {'equals' if same else 'DIFFERS FROM'} one-phase row for row")
    spark.stop()
