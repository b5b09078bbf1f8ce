"""Benchmark W3: a 1000 ms tumbling event-time count per key, in one process (no Spark).

W3: 2M rows, 1k keys, ts = i - ((i*7919) % 500) (about one row per key and window);
W3b: ts = i // 10 - ((i*7919) % 500) (about ten rows per key and window). The window
operator runs in a real one-input task (OneInputHarness) fed 65,536-row batches, each
followed by the watermark a bounded-out-of-orderness (500 ms) source sends. Variants:
batch-level ``aggregate_columns`` and per-record ``aggregate`` (an AggregateFunction);
the baseline is pyarrow computing the same counts with one group_by over the whole
table. Every variant's counts are checked against the baseline's. Median of --runs.

--spark runs W3b (or W3 with ``--only W3``) on Spark (local[2]) instead: flintlock's job
from a DataFrame (bounded out-of-orderness 500 ms, key_by, tumbling 1000 ms window,
aggregate_columns count), one-phase (``pre_aggregate=False``) and two-phase, against
Spark SQL's ``groupBy(window(ts, '1 second'), k).count()`` on the same frame in the same
session, interleaved; every answer checked equal to Spark SQL's, the two plans' outputs
row for row. Every row's disorder is below the 500 ms bound, so no row is late in any
(flintlock's late rows are counted too).

    python bench/w3.py [--rows 2000000] [--keys 1000] [--runs 3] [--skip-per-record] [--only W3b]
    python bench/w3.py --spark [--rows 2000000] [--runs 5] [--only W3]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from timing import timed

from flintlock import TumblingEventTimeWindows
from flintlock.core.api.keys import ColumnKey
from flintlock.core.api.window_functions import AggregateContents, ProcessWindowFunction
from flintlock.core.state.aggregate import AggregateFunction
from flintlock.operators.window_batch import BatchWindowAggregateOperator
from flintlock.operators.windows import WindowOperator
from flintlock.testing import OneInputHarness

SIZE = 1000
BATCH = 65_536
OUT_OF_ORDERNESS = 500


class Count(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, a: int, b: int) -> int:
        return a + b


class KeyStartCount(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: list[Any], out: Any) -> None:
        out.collect({"k": key, "window_start": context.window.start, "n": elements[0]})


def workload(rows: int, keys: int, rows_per_ms: int) -> pa.Table:
    i = np.arange(rows, dtype=np.int64)
    return pa.table({"k": i % keys, "ts": i // rows_per_ms - ((i * 7919) % 500)})


def baseline(table: pa.Table) -> pa.Table:
    """pyarrow (numpy for the window start): one group_by (key, start) -> count."""
    ts = table.column("ts").to_numpy()
    keyed = pa.table({"k": table.column("k"), "window_start": ts // SIZE * SIZE})
    return keyed.group_by(["k", "window_start"]).aggregate([("k", "count")])


def per_record(row_by_row: bool = False) -> WindowOperator:
    """The per-record window operator; ``row_by_row`` turns its batch grouping off (the
    path every row took before it, kept for triggers and late firings)."""
    operator = WindowOperator(
        TumblingEventTimeWindows.of(SIZE),
        AggregateContents(Count(), KeyStartCount()),
        ColumnKey("k"),
        "ts",
    )
    if row_by_row:
        operator._shape = None
    return operator


def run_operator(operator: Any, table: pa.Table) -> pa.Table:
    """Feed the table in batches with the source's watermarks; the operator's output."""
    harness = OneInputHarness(operator)
    for batch in table.to_batches(max_chunksize=BATCH):
        harness.process_batch(batch)
        top = pc.max(batch.column("ts")).as_py()
        harness.process_watermark(top - OUT_OF_ORDERNESS - 1)
    harness.end_input()
    return harness.output()


def counts(table: pa.Table, column: str) -> dict[tuple[int, int], int]:
    columns = (table.column(c).to_pylist() for c in ("k", "window_start", column))
    return {(k, s): n for k, s, n in zip(*columns, strict=True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-per-record", action="store_true")
    parser.add_argument("--spark", action="store_true")
    parser.add_argument("--only", choices=("W3", "W3b"), help="run one workload")
    args = parser.parse_args()
    if args.spark:
        from w3_spark import spark_w3b

        spark_w3b(args.rows, args.keys, args.runs, args.only or "W3b")
        return
    for label, rows_per_ms in (("W3", 1), ("W3b", 10)):
        if args.only not in (None, label):
            continue
        table = workload(args.rows, args.keys, rows_per_ms)
        variants: dict[str, Callable[[], Any]] = {
            "pyarrow group_by (baseline)": lambda t=table: baseline(t),
            "batch-level aggregate_columns": lambda t=table: run_operator(
                BatchWindowAggregateOperator(
                    TumblingEventTimeWindows.of(SIZE), {"n": ("ts", "count")}, ColumnKey("k"), "ts"
                ),
                t,
            ),
        }
        if not args.skip_per_record:
            variants["per-record aggregate"] = lambda t=table: run_operator(per_record(), t)
            variants["per-record, row by row"] = lambda t=table: run_operator(
                per_record(row_by_row=True), t
            )
        figures = timed(args.runs, variants)
        reference = counts(figures["pyarrow group_by (baseline)"][1], "k_count")
        base = figures["pyarrow group_by (baseline)"][0]
        print(f"{label}: {args.rows:,} rows, {args.keys:,} keys, {len(reference):,} windows")
        print(f"  {'variant':<32}{'seconds':>9}{'M rows/s':>10}{'vs pyarrow':>12}  result")
        for name, (seconds, output) in figures.items():
            got = (
                reference
                if output is figures["pyarrow group_by (baseline)"][1]
                else counts(output, "n")
            )
            check = "equal" if got == reference else "MISMATCH"
            print(
                f"  {name:<32}{seconds:>9.3f}{args.rows / seconds / 1e6:>10.2f}"
                f"{base / seconds:>11.2f}x  {check}"
            )


if __name__ == "__main__":
    main()
