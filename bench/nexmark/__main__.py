"""``python -m bench.nexmark --query all --events 10_000_000``: every Nexmark query on
local Spark (2 cores), per query: events/s/core at steady state with a checkpoint per
epoch (batch-level and per-record forms), the same query in Spark Structured Streaming in
the same run where Spark can run it, Flink's published per-core figure, latency p50/p99 at
a fixed input rate, checkpoint duration and size, and the check against DuckDB."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from . import ship_to_workers
from .flintlock_run import Throughput, checked_run, latency_run, median, timed_run
from .model import NexmarkConfig
from .queries import QUERIES, Query
from .spark_streaming import SPARK_ROWS_DIFFER, SPARK_SQL, spark_run

CORES = 2
FLINK_PER_CORE = {
    "q0": 175_000,
    "q1": 175_000,
    "q2": 175_000,
    "q4": 34_000,
    "q5": 22_000,
    "q7": 12_000,
    "q20": 19_000,
}
"""Flink's published Nexmark throughput per core (the issue's anchors; q0-q2: 155-175 k,
compared with the upper end)."""


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    names = sorted(QUERIES, key=_number) if args.query == "all" else args.query.split(",")
    unknown = [name for name in names if name not in QUERIES]
    if unknown:
        sys.exit(f"unknown queries {unknown}; known: {sorted(QUERIES, key=_number)}")
    spark = _session()
    ship_to_workers()
    config = NexmarkConfig(seed=args.seed, out_of_order_group=args.out_of_order)
    print(
        f"Nexmark on flintlock: {args.events:,} events, {args.epochs} epochs (a checkpoint "
        f"each), parallelism {CORES}, local[{CORES}]; per-core figures = events / steady "
        f"seconds (first epoch left out) / {CORES} cores"
    )
    for name in names:
        report(spark, QUERIES[name], args, config)


def report(spark: Any, query: Query, args: argparse.Namespace, config: NexmarkConfig) -> None:
    """One query's figures, printed as they come."""
    forms = ["batch"] + (["per_record"] if query.per_record and not args.batch_only else [])
    print(f"\n{query.name} ({query.title})")
    if args.latency_only:
        forms = []
    for form in forms:  # the check: every run's output equals DuckDB's
        problems = checked_run(spark, query, form, args.check_events, config)
        verdict = "equal to DuckDB" if not problems else "DIFFERENT: " + "; ".join(problems[:3])
        print(f"  check ({form}, {args.check_events:,} events): {verdict}")
    spark_figure = None
    if forms and not args.no_spark and query.name in SPARK_SQL:
        spark_run(spark, query.name, query.inputs, args.events // 10, 2, CORES, config)  # warm-up
        spark_figure = spark_run(
            spark, query.name, query.inputs, args.events, args.epochs, CORES, config
        )
        _line("Spark Structured Streaming", spark_figure, None, None)
    for form in forms:
        timed_run(spark, query, form, args.events // 10, 2, CORES, CORES, config)  # warm-up
        figure = timed_run(spark, query, form, args.events, args.epochs, CORES, CORES, config)
        _line(f"flintlock {form}", figure, spark_figure, FLINK_PER_CORE.get(query.name))
        if spark_figure is not None and spark_figure.output_rows != figure.output_rows:
            why = SPARK_ROWS_DIFFER.get(query.name, "the two do not compute the same thing")
            print(
                f"  NOTE: Spark emitted {spark_figure.output_rows:,} rows, flintlock "
                f"{figure.output_rows:,}: {why}"
            )
    if args.latency_rate and query.latency_column is not None:
        try:
            latency = latency_run(
                spark, query, "batch", args.latency_rate, args.latency_seconds, CORES
            )
        except Exception as error:  # one query's failure must not end the whole run
            print(f"  latency: FAILED: {str(error).splitlines()[0]}")
            return
        print(
            f"  latency at {args.latency_rate:,} events/s, 1 s trigger: p50 "
            f"{latency['p50_s']:.3f} s, p99 {latency['p99_s']:.3f} s ({latency['rows']:,} "
            f"rows; {latency['closed_by_end']:,} more closed by the input's end, not counted)"
        )


def _line(label: str, figure: Throughput, spark: Throughput | None, flink: int | None) -> None:
    ratios = []
    if spark is not None:
        ratios.append(f"{figure.events_per_core_second / spark.events_per_core_second:.2f}x Spark")
    if flink is not None:
        ratios.append(f"{figure.events_per_core_second / flink:.2f}x Flink ({flink / 1000:.0f}k)")
    checkpoints = figure.checkpoint_ms[1:] or figure.checkpoint_ms
    print(
        f"  {label:<28} {figure.events_per_core_second / 1000:8.1f} k events/s/core"
        f"  {', '.join(ratios) or '':<32} epochs {figure.epochs}, checkpoint median "
        f"{median(checkpoints):.0f} ms, max state {max(figure.checkpoint_bytes or [0]):,} B,"
        f" {figure.output_rows:,} rows out"
    )


def _number(name: str) -> int:
    return int(name.lstrip("q"))


def _session() -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/timing.py
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from timing import local_session

    return local_session()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark", description=__doc__)
    parser.add_argument("--query", default="all", help="all, or names: q0,q5,q7")
    parser.add_argument("--events", type=lambda s: int(s.replace("_", "")), default=10_000_000)
    parser.add_argument("--epochs", type=int, default=10, help="a checkpoint each")
    parser.add_argument("--check-events", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-of-order", type=int, default=1, help="events per shuffled group")
    parser.add_argument("--batch-only", action="store_true", help="skip per-record forms")
    parser.add_argument("--no-spark", action="store_true", help="skip Structured Streaming")
    parser.add_argument("--latency-rate", type=int, default=0, help="events/s (0: skip)")
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--latency-only", action="store_true", help="no check, no throughput")
    return parser


if __name__ == "__main__":
    main()
