"""Benchmark W1 on local Spark: flintlock per batch and per record vs raw mapInArrow.

W1: map value*2 -> filter key%2==0 -> count and sum, parallelism 2, on the same input
DataFrame as the baseline, in the same session, after a warm-up; median of 5 runs,
interleaved across the variants. Prints records/s (input rows) and each figure's ratio
to the raw mapInArrow baseline. The input is ``spark.range(N, numPartitions=2)``, read
as it is (``--input uncached``, each run computes it) or cached once (``--input cached``).

    python bench/w1.py [--rows 10000000] [--runs 5] [--input uncached|cached] [--metrics]
    python bench/w1.py --in-process [--rows 2000000]

Per record, flintlock is also set against raw mapInArrow running the same per-record
functions on the same rows (``raw mapInArrow per record``), in the same run.
``--in-process`` times W1 per record without Spark, on one core: flintlock's task in a
harness against a plain CPython loop over the same dicts and functions.

``--metrics`` times flintlock per batch with metrics on (the default) against off
(``FLINTLOCK_METRICS=0``, as ``execute(metrics=False)``) in the same run, interleaved.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import w1
from pyspark import cloudpickle
from timing import local_session, timed

cloudpickle.register_pickle_by_value(w1)  # workers cannot import examples/w1.py

SPARK_BATCH = 10_000
"""Rows per Arrow batch in-process: Spark's default ``maxRecordsPerBatch``."""


def main() -> None:
    """Run the three variants and print one table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--input", choices=["uncached", "cached"], default="uncached")
    parser.add_argument("--skip-per-record", action="store_true")
    parser.add_argument("--metrics", action="store_true", help="metrics on against off")
    parser.add_argument("--in-process", action="store_true", help="per record, no Spark")
    args = parser.parse_args()
    if args.in_process:
        print_in_process(args.rows, args.runs)
        return
    spark = local_session(driver_memory="4g")
    frame = w1.w1_input(spark, args.rows, partitions=2)
    if args.input == "cached":
        frame = frame.cache()
        frame.count()  # materialise the input once: every variant reads the same cached rows
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    variants: dict[str, Callable[[], Any]] = {
        "raw mapInArrow (baseline)": lambda: w1.raw_map_in_arrow_w1(frame),
        "flintlock per batch": lambda: w1.flintlock_w1(spark, frame, 2, False, scratch),
    }
    if args.metrics:
        variants["flintlock, metrics off"] = lambda: metrics_off(
            lambda: w1.flintlock_w1(spark, frame, 2, False, scratch)
        )
    elif not args.skip_per_record:
        variants["raw mapInArrow per record"] = lambda: w1.raw_map_in_arrow_w1_per_record(frame)
        variants["flintlock per record"] = lambda: w1.flintlock_w1(spark, frame, 2, True, scratch)
    for _ in range(2):  # warm-up: the JVM's JIT, Python workers, imports
        for work in variants.values():
            work()
    figures = timed(args.runs, variants)
    baseline = figures["raw mapInArrow (baseline)"][0]
    print(
        f"W1, {args.rows:,} rows ({args.input} input), parallelism 2, local[2], "
        f"median of {args.runs}"
    )
    print(f"{'variant':<28}{'seconds':>10}{'records/s':>14}{'vs baseline':>13}  result")
    for name, (seconds, result) in figures.items():
        print(
            f"{name:<28}{seconds:>10.2f}{args.rows / seconds:>14,.0f}"
            f"{seconds / baseline:>12.2f}x  {result[0]} rows, sum {result[1]:.1f}"
        )
    if "flintlock per record" in figures:
        ratio = figures["raw mapInArrow per record"][0] / figures["flintlock per record"][0]
        print(f"per record: flintlock at {ratio:.2f}x raw mapInArrow's throughput")
    if args.metrics:
        ratio = figures["flintlock per batch"][0] / figures["flintlock, metrics off"][0]
        print(f"metrics on / off: {ratio:.3f}x")
    results = {r for _, r in figures.values()}
    print("all variants agree" if len({(c, round(s, 3)) for c, s in results}) == 1 else "MISMATCH")
    print_fixed_cost(spark, args.runs, scratch, args.metrics)
    spark.stop()


def print_in_process(rows: int, runs: int) -> None:
    """W1 per record on one core, no Spark: flintlock's task against the CPython loop."""
    batches = w1.w1_arrow_input(rows).to_batches(max_chunksize=SPARK_BATCH)
    variants = {
        "CPython loop, same functions (floor)": lambda: w1.python_loop_w1(batches),
        "flintlock per record, in-process": lambda: w1.in_process_w1(batches),
    }
    for work in variants.values():
        work()  # warm-up
    figures = timed(runs, variants)
    print(
        f"W1 per record, {rows:,} rows in {SPARK_BATCH:,}-row batches, one core, median of {runs}"
    )
    floor = figures["CPython loop, same functions (floor)"][0]
    for name, (seconds, (count, total)) in figures.items():
        print(
            f"{name:<38}{seconds:>8.3f} s{rows / seconds:>14,.0f} rec/s"
            f"{floor / seconds:>8.2f}x floor  {count} rows, sum {total:.1f}"
        )
    agree = len({(c, round(t, 3)) for _, (c, t) in figures.values()}) == 1
    print("all variants agree" if agree else "MISMATCH")


def metrics_off(work: Callable[[], Any]) -> Any:
    """Run ``work`` with metrics off (the switch ``execute()`` reads when not told)."""
    os.environ["FLINTLOCK_METRICS"] = "0"
    try:
        return work()
    finally:
        del os.environ["FLINTLOCK_METRICS"]


def print_fixed_cost(spark: Any, runs: int, scratch: str, metrics: bool = False) -> None:
    """What a job costs whatever its size: W1 over 1,000 rows, flintlock minus raw."""
    tiny = w1.w1_input(spark, 1_000, partitions=2)
    variants = {
        "raw": lambda: w1.raw_map_in_arrow_w1(tiny),
        "flintlock": lambda: w1.flintlock_w1(spark, tiny, 2, False, scratch),
    }
    if metrics:
        variants["off"] = lambda: metrics_off(variants["flintlock"])
    figures = timed(max(runs, 7), variants)
    raw, flintlock = figures["raw"][0], figures["flintlock"][0]
    print(
        f"fixed cost per job (1,000 rows): raw {raw:.3f} s, flintlock per batch "
        f"{flintlock:.3f} s, +{flintlock - raw:.3f} s (planning, final checkpoint, "
        f"acknowledgements, commit, job result)"
    )
    if metrics:
        off = figures["off"][0]
        print(f"  with metrics off: {off:.3f} s; metrics cost {flintlock - off:+.3f} s per job")


if __name__ == "__main__":
    main()
