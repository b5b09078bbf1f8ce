"""Benchmark W1 with metrics and the live progress display on against both off, in the
same run.

W1 per batch (map value*2 -> filter key%2==0 -> count and sum, parallelism 2, local[2])
over the same input DataFrame, in one session, after a warm-up; rounds of every variant
once, in a rotated order. "progress on" is the live display a terminal gets (``LiveProgress``: rich
redrawing, and a thread polling Spark's status tracker every 0.5 s), its console forced
to terminal mode and writing to memory; "off" is ``progress=False``; metrics off is
``execute(metrics=False)``. Prints each variant's median seconds and its time over "both
off"'s in the same round (median and quartiles of those ratios: a slow moment of the
machine falls on both sides of a ratio).

    python bench/w1_progress.py [--rows 10000000] [--runs 7]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import w1
from pyspark import cloudpickle
from rich.console import Console
from timing import local_session, rotated_rounds

from flintlock import StreamExecutionEnvironment
from flintlock.core.job.progress import LiveProgress

cloudpickle.register_pickle_by_value(w1)  # workers cannot import examples/w1.py


def run_w1(
    spark: Any, frame: Any, scratch: str, progress: Any, metrics: bool = True
) -> tuple[int, float, int]:
    """W1 per batch as a new job; (count, sum, bytes the display wrote)."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=scratch)
    stream = env.from_dataframe(frame).map_batch(w1.double_value).filter_batch(w1.even_key)
    sink = env.registry.get("sink", "collect")(name="out", schema=w1.RESULT_SCHEMA)
    stream.transform("count_sum", w1.CountSum).sink_to(sink, name="out")
    result = env.execute(f"w1-progress-{uuid.uuid4().hex[:8]}", progress=progress, metrics=metrics)
    table = result.collected["out"]
    drawn = len(progress.console.file.getvalue()) if isinstance(progress, LiveProgress) else 0
    return sum(table.column("count").to_pylist()), sum(table.column("sum").to_pylist()), drawn


def live() -> LiveProgress:
    """The display a terminal gets, drawing into memory."""
    return LiveProgress(Console(file=io.StringIO(), force_terminal=True, width=120))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    spark = local_session(driver_memory="4g")
    frame = w1.w1_input(spark, args.rows, partitions=2)
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    variants = {
        "both off": lambda: run_w1(spark, frame, scratch, False, metrics=False),
        "metrics on": lambda: run_w1(spark, frame, scratch, False),
        "progress on (live)": lambda: run_w1(spark, frame, scratch, live(), metrics=False),
        "both on": lambda: run_w1(spark, frame, scratch, live()),
    }
    for _ in range(2):  # warm-up: the JVM's JIT, Python workers, imports
        for work in variants.values():
            work()
    seconds, answers = rotated_rounds(args.runs, variants)
    off = seconds["both off"]
    print(f"W1 per batch, {args.rows:,} rows, parallelism 2, local[2], {args.runs} rounds")
    print(f"{'variant':<20}{'median':>9}  {'/ both off, same round: median [quartiles]':<44}")
    for name, runs in seconds.items():
        count, total, drawn = answers[name]
        ratios = sorted(r / o for r, o in zip(runs, off, strict=True))
        low, mid, high = statistics.quantiles(ratios, n=4)
        print(
            f"{name:<20}{statistics.median(runs):>8.2f}s  {mid:.3f}x [{low:.3f}, {high:.3f}]"
            f"{'':<18}{count} rows, sum {total:.1f}{f', {drawn:,} B drawn' if drawn else ''}"
        )
    figures = {name: (0.0, answer) for name, answer in answers.items()}
    results = {(c, round(s, 3)) for _, (c, s, _) in figures.values()}
    print("all variants agree" if len(results) == 1 else "MISMATCH")
    spark.stop()


if __name__ == "__main__":
    main()
