"""W2 on local Spark: key_by k -> running sum per key, batch-level, against raw PySpark.

flintlock ``from_dataframe(frame).key_by("k").process_batch(BatchRunningSum())`` at
parallelism 2 against raw ``frame.repartition(2, "k").mapInArrow(...)`` doing a CPython
dict loop (issue 23's baseline) and doing the same numpy running sum as BatchRunningSum,
in one session, runs interleaved, median of ``--runs``. Every variant's rows are checked:
each row's total is the previous total of its key plus its own value, in some order
(rows of one key from two upstream tasks interleave on any shuffle).

It also prints issue 23's build-up step by step, each flintlock step against the raw
Spark job doing the same: a source alone (count rows) against a raw read, and a source +
key_by against a raw ``repartition(2, "k")``.

    python bench/w2_spark.py [--rows 2000000] [--keys 10000] [--runs 5] [--steps-only]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import state_functions
from pyspark import cloudpickle
from state_functions import RUNNING_SUM_SCHEMA, BatchRunningSum, running_sums
from timing import local_session, timed

from flintlock import OneInputStreamOperator, StreamExecutionEnvironment

cloudpickle.register_pickle_by_value(state_functions)  # workers cannot import tests/
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # bench/profile_stages.py imports it
COUNT_SCHEMA = pa.schema([("rows", pa.int64())])


def w2_input(spark: Any, rows: int, keys: int) -> Any:
    """(i, k, v) over ``spark.range`` in 2 partitions; v in 1..1000, so totals grow."""
    from pyspark.sql import functions as F

    return spark.range(0, rows, 1, 2).select(
        F.col("id").alias("i"),
        ((F.col("id") * F.lit(2654435761)) % keys).alias("k"),
        ((F.col("id") % 1000) + 1).alias("v"),
    )


class CountRows(OneInputStreamOperator):
    """Counts its rows per batch; one row per subtask at the end of input."""

    def open(self) -> None:
        self.rows = 0

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.rows += batch.num_rows

    def end_input(self, input_index: int) -> None:
        self.output.emit(pa.record_batch([[self.rows]], schema=COUNT_SCHEMA))


def count_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The raw side of a step: count the partition's rows."""
    yield pa.record_batch([[sum(b.num_rows for b in batches)]], schema=COUNT_SCHEMA)


def dict_loop_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Issue 23's raw baseline: a CPython dict of running sums over each batch's rows."""
    totals: dict[int, int] = {}
    get = totals.get
    for batch in batches:
        out = []
        append = out.append
        for k, v in zip(batch.column(1).to_pylist(), batch.column(2).to_pylist(), strict=True):
            total = get(k, 0) + v
            totals[k] = total
            append(total)
        yield pa.RecordBatch.from_arrays(
            [batch.column(0), batch.column(1), pa.array(out, pa.int64())],
            schema=RUNNING_SUM_SCHEMA,
        )


def numpy_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The same numpy work as BatchRunningSum, state in a dict of arrays per batch."""
    totals: dict[int, int] = {}
    for batch in batches:
        encoded = batch.column(1).dictionary_encode()
        unique = encoded.dictionary.to_numpy()
        codes = encoded.indices.to_numpy()
        start = np.fromiter((totals.get(k, 0) for k in unique.tolist()), np.int64, len(unique))
        values = batch.column(2).to_numpy()
        ends = start.copy()
        np.add.at(ends, codes, values)
        totals.update(zip(unique.tolist(), ends.tolist(), strict=True))
        yield pa.RecordBatch.from_arrays(
            [
                batch.column(0),
                batch.column(1),
                pa.array(running_sums(codes, values) + start[codes]),
            ],
            schema=RUNNING_SUM_SCHEMA,
        )


def raw(frame: Any, shuffle: bool, work: Callable, schema: str) -> pa.Table:
    """A raw PySpark job: ``work`` over the frame's partitions, or after repartition(2, k)."""
    source = frame.repartition(2, "k") if shuffle else frame
    return source.mapInArrow(work, schema).toArrow()


def flintlock(spark: Any, frame: Any, scratch: str, step: str) -> pa.Table:
    """flintlock at parallelism 2: ``source`` (count), ``key_by`` (count) or ``w2``."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=scratch)
    stream = env.from_dataframe(frame)
    if step != "source":
        stream = stream.key_by("k")
    if step == "w2":
        stream = stream.process_batch(BatchRunningSum())
    else:
        stream = stream.transform("count", CountRows)
    return stream.execute_and_collect(f"w2-{step}-{uuid.uuid4().hex[:8]}")


def check_running_sums(table: pa.Table, rows: int, keys: int) -> None:
    """Every input row once; per key, sorted by total, each total = the one before + v."""
    i = table.column("i").to_numpy()
    k = table.column("k").to_numpy()
    total = table.column("total").to_numpy()
    if len(i) != rows or not np.array_equal(np.sort(i), np.arange(rows)):
        raise SystemExit(f"wrong rows: {len(i)} of {rows}")
    if not np.array_equal(k, (i * 2654435761) % keys):
        raise SystemExit("a row's key changed")
    order = np.lexsort((total, k))
    k, total, v = k[order], total[order], (i[order] % 1000) + 1
    previous = np.concatenate([[0], total[:-1]])
    previous[np.concatenate([[True], k[1:] != k[:-1]])] = 0
    if not np.array_equal(total - previous, v):
        raise SystemExit("a running total is not the previous total of its key plus its value")


def print_table(title: str, figures: dict[str, tuple[float, Any]], rows: int, base: str) -> None:
    """One markdown table: seconds, M rows/s and the ratio to ``base``."""
    print(title)
    print("| variant | seconds | M rows/s | vs baseline |")
    print("| --- | ---: | ---: | ---: |")
    reference = figures[base][0]
    for name, (seconds, _) in figures.items():
        print(
            f"| {name} | {seconds:.3f} | {rows / seconds / 1e6:.2f} | {seconds / reference:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps-only", action="store_true", help="only the build-up")
    parser.add_argument("--w2-only", action="store_true", help="only W2")
    args = parser.parse_args()
    spark = local_session(driver_memory="4g")
    frame = w2_input(spark, args.rows, args.keys)
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    counts = "rows long"
    steps: dict[str, Callable[[], Any]] = {
        "raw read + count (baseline)": lambda: raw(frame, False, count_partition, counts),
        "flintlock source + count": lambda: flintlock(spark, frame, scratch, "source"),
        "raw repartition(2, k) + count": lambda: raw(frame, True, count_partition, counts),
        "flintlock source + key_by + count": lambda: flintlock(spark, frame, scratch, "key_by"),
    }
    sums = "i long, k long, total long"
    w2: dict[str, Callable[[], Any]] = {
        "raw repartition + dict loop (baseline)": lambda: raw(
            frame, True, dict_loop_partition, sums
        ),
        "raw repartition + numpy": lambda: raw(frame, True, numpy_partition, sums),
        "flintlock key_by + BatchRunningSum": lambda: flintlock(spark, frame, scratch, "w2"),
    }
    chosen = {**({} if args.w2_only else steps), **({} if args.steps_only else w2)}
    for work in chosen.values():  # warm-up: the JVM's JIT, Python workers, imports
        work()
    figures = timed(args.runs, chosen)
    header = (
        f"{args.rows:,} rows, {args.keys:,} keys, parallelism 2, local[2], median of {args.runs}"
    )
    if not args.w2_only:
        for name in steps:
            got = sum(figures[name][1].column("rows").to_pylist())
            if got != args.rows:
                raise SystemExit(f"{name}: counted {got} rows of {args.rows}")
        print_table(
            f"Build-up, {header}", {n: figures[n] for n in steps}, args.rows, next(iter(steps))
        )
        pairs = list(steps)
        for raw_name, ours in ((pairs[0], pairs[1]), (pairs[2], pairs[3])):
            theirs, mine = figures[raw_name][0], figures[ours][0]
            print(f"  {ours}: {mine / theirs:.2f}x {raw_name} ({mine - theirs:+.3f} s)")
    if not args.steps_only:
        for name in w2:
            check_running_sums(figures[name][1], args.rows, args.keys)
        print_table(
            f"W2 batch-level, {header}", {n: figures[n] for n in w2}, args.rows, next(iter(w2))
        )
        print("every variant's running sums checked")
    spark.stop()


if __name__ == "__main__":
    main()
