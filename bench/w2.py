"""W2: key_by key -> running sum in ValueState, one output row per record.

In-process, on one core: flintlock's real one-input task in a harness (no Spark), fed
65,536-row batches, per record (KeyedProcessFunction) and per batch
(KeyedBatchProcessFunction with ``values`` / ``update_values``), on each state backend;
against a CPython dict loop and numpy, measured in the same run. Every variant's output
is checked against the dict loop's.

    python bench/w2.py [--rows 2000000] [--keys 10000] [--backends hashmap,sqlite]
    python bench/w2.py --spark [--rows 4000000] [--runs 5]
    python bench/w2.py --chain [--rows 1000000] [--runs 9]

``--spark``: W2 per record on local Spark at parallelism 2 (a DataFrame source, key_by k,
the KeyedProcessFunction, then a per-record check that keeps each key's last total), against
raw PySpark ``repartition(k)`` + ``mapInArrow`` running the same dict loop per record
(output rows built, then the same check), interleaved, median of ``--runs``; both answer
(rows, sum of final totals), which must equal (rows, sum of v).

``--chain``: what that job's keyed stage runs in Python, in-process on one core: the
RunningSum -> LastTotals chain in a harness against raw's Python stage (``raw_work``) on
the same batches, interleaved; both answers must agree.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import state_functions
from pyspark import cloudpickle
from state_functions import RUNNING_SUM_SCHEMA, BatchRunningSum, RunningSum, running_sums

from flintlock import ProcessFunction, StreamExecutionEnvironment
from flintlock.operators.batch_process import KeyedBatchProcessOperator
from flintlock.operators.process import KeyedProcessOperator, ProcessOperator
from flintlock.testing import OneInputHarness

BATCH = 65536

cloudpickle.register_pickle_by_value(state_functions)  # workers cannot import tests/
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # nor this script


def data(rows: int, keys: int) -> pa.Table:
    rng = np.random.default_rng(42)
    return pa.table(
        {
            "i": np.arange(rows, dtype=np.int64),
            "k": rng.integers(0, keys, rows, dtype=np.int64),
            "v": rng.integers(0, 1000, rows, dtype=np.int64),
        }
    )


def dict_loop(table: pa.Table) -> np.ndarray:
    """The baseline: a CPython dict of running sums, Python ints in and out."""
    keys, values = table.column("k").to_pylist(), table.column("v").to_pylist()
    totals: dict[int, int] = {}
    out = []
    append, get = out.append, totals.get
    for k, v in zip(keys, values, strict=True):
        total = get(k, 0) + v
        totals[k] = total
        append(total)
    return np.array(out)


def numpy_sums(table: pa.Table) -> np.ndarray:
    """The vectorised reference: group codes, then a grouped cumulative sum."""
    keys = table.column("k").to_numpy()
    _, codes = np.unique(keys, return_inverse=True)
    return running_sums(codes, table.column("v").to_numpy())


def flintlock(operator: Callable[[], object], backend: str) -> Callable[[pa.Table], np.ndarray]:
    def run(table: pa.Table) -> np.ndarray:
        harness = OneInputHarness(operator(), state_backend=backend)  # type: ignore[arg-type]
        for batch in table.to_batches(max_chunksize=BATCH):
            harness.process_batch(batch)
        harness.complete()
        return harness.output().column("total").to_numpy()

    return run


def timed(run: Callable[[pa.Table], np.ndarray], table: pa.Table) -> tuple[float, np.ndarray]:
    gc.collect()
    started = time.perf_counter()
    out = run(table)
    return time.perf_counter() - started, out


class LastTotals(ProcessFunction):
    """The check after W2: each key's last running total; (rows, their sum) at the end."""

    output_schema = pa.schema([("rows", pa.int64()), ("sum", pa.int64())])

    def open(self) -> None:
        self.rows, self.last = 0, {}

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.rows += 1
        self.last[value["k"]] = value["total"]

    def on_end_of_input(self, out: Any) -> None:
        out.collect({"rows": self.rows, "sum": sum(self.last.values())})


def spark_input(spark: Any, rows: int, keys: int) -> Any:
    """The W2 input on Spark: i, k = i*2654435761 % keys, v = i % 1000, 2 partitions."""
    from pyspark.sql import functions as F

    return spark.range(0, rows, 1, 2).select(
        F.col("id").alias("i"),
        ((F.col("id") * F.lit(2654435761)) % keys).alias("k"),
        (F.col("id") % 1000).alias("v"),
    )


def flintlock_spark(spark: Any, frame: Any, scratch: str) -> tuple[int, int]:
    """W2 per record on flintlock: key_by k -> RunningSum -> LastTotals."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=scratch)
    stream = env.from_dataframe(frame).key_by("k").process(RunningSum())
    table = stream.process(LastTotals()).execute_and_collect(f"w2-{uuid.uuid4().hex[:8]}")
    return sum(table.column("rows").to_pylist()), sum(table.column("sum").to_pylist())


def raw_work(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Raw's Python stage: the dict loop per record, its rows as a batch, then the check."""
    totals: dict[int, int] = {}
    rows, last = 0, {}
    for batch in batches:
        out = []
        for row in batch.to_pylist():
            total = totals.get(row["k"], 0) + row["v"]
            totals[row["k"]] = total
            out.append({"i": row["i"], "k": row["k"], "total": total})
        for row in pa.RecordBatch.from_pylist(out, schema=RUNNING_SUM_SCHEMA).to_pylist():
            rows += 1
            last[row["k"]] = row["total"]
    yield pa.record_batch([[rows], [sum(last.values())]], names=["rows", "sum"])


def raw_spark(frame: Any) -> tuple[int, int]:
    """The baseline: repartition(k) + mapInArrow, the same dict loop and check per record."""
    table = frame.repartition(2, "k").mapInArrow(raw_work, "rows long, sum long").toArrow()
    return sum(table.column("rows").to_pylist()), sum(table.column("sum").to_pylist())


def keyed_chain(batches: list[pa.RecordBatch]) -> tuple[int, int]:
    """What the keyed stage of ``flintlock_spark`` runs, in-process: RunningSum -> LastTotals."""
    harness = OneInputHarness(
        KeyedProcessOperator(RunningSum(), key_column="k"), ProcessOperator(LastTotals())
    )
    for batch in batches:
        harness.process_batch(batch)
    harness.complete()
    (row,) = harness.output_rows()
    return row["rows"], row["sum"]


def main_chain(rows: int, keys: int, runs: int) -> None:
    """The keyed stage's Python work in-process: flintlock's chain against raw's."""
    batches = data(rows, keys).to_batches(max_chunksize=BATCH)
    variants: dict[str, Callable[[], tuple[int, int]]] = {
        "raw's Python stage (baseline)": lambda: tuple(
            next(raw_work(iter(batches))).to_pylist()[0].values()
        ),
        "flintlock RunningSum -> LastTotals": lambda: keyed_chain(batches),
    }
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    answers = set()
    for _ in range(runs):  # interleaved
        for name, run in variants.items():
            gc.collect()
            started = time.perf_counter()
            answers.add(run())
            seconds[name].append(time.perf_counter() - started)
    if len(answers) != 1:
        raise SystemExit(f"the two disagree: {answers}")
    print(f"W2 per record's keyed stage in-process, {rows:,} rows, {keys:,} keys, median of {runs}")
    base = sorted(seconds["raw's Python stage (baseline)"])[runs // 2]
    for name, times in seconds.items():
        median = sorted(times)[runs // 2]
        rate, ratio = rows / median / 1e6, base / median
        print(f"{name:<38}{median:>8.3f} s{rate:>8.2f} M rec/s{ratio:>7.2f}x")


def main_spark(rows: int, keys: int, runs: int) -> None:
    """W2 per record on Spark against raw PySpark, interleaved."""
    from timing import local_session
    from timing import timed as timed_runs

    spark = local_session(driver_memory="4g")
    frame = spark_input(spark, rows, keys)
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    variants = {
        "raw repartition + mapInArrow (baseline)": lambda: raw_spark(frame),
        "flintlock per record": lambda: flintlock_spark(spark, frame, scratch),
    }
    for work in variants.values():
        work()  # warm-up
    figures = timed_runs(runs, variants)
    expected = (rows, sum(i % 1000 for i in range(rows)))
    print(f"W2 per record on Spark, {rows:,} rows, {keys:,} keys, parallelism 2, median of {runs}")
    base = figures["raw repartition + mapInArrow (baseline)"][0]
    for name, (seconds, answer) in figures.items():
        check = "ok" if answer == expected else f"WRONG {answer} != {expected}"
        rate, ratio = rows / seconds, base / seconds
        print(f"{name:<42}{seconds:>8.2f} s{rate:>14,.0f} rec/s{ratio:>7.2f}x  {check}")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--backends", default="hashmap,sqlite")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="per record on local Spark")
    parser.add_argument(
        "--chain", action="store_true", help="the Spark keyed stage's Python work, in-process"
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.spark:
        main_spark(args.rows, args.keys, args.runs)
        return
    if args.chain:
        main_chain(args.rows, args.keys, args.runs)
        return
    table = data(args.rows, args.keys)
    variants: list[tuple[str, Callable[[pa.Table], np.ndarray]]] = [
        ("CPython dict loop (baseline)", dict_loop),
        ("numpy (reference)", numpy_sums),
    ]
    for backend in args.backends.split(","):
        variants.append(
            (
                f"flintlock per record, {backend}",
                flintlock(lambda: KeyedProcessOperator(RunningSum(), key_column="k"), backend),
            )
        )
        variants.append(
            (
                f"flintlock batch-level, {backend}",
                flintlock(
                    lambda: KeyedBatchProcessOperator(BatchRunningSum(), key_column="k"), backend
                ),
            )
        )
    expected = dict_loop(table)
    best: dict[str, float] = {}
    for _ in range(args.repeat):  # rounds interleaved across variants
        for name, run in variants:
            if name.startswith("flintlock per record, sqlite") and name in best:
                continue  # slow; once is enough
            seconds, out = timed(run, table)
            if not np.array_equal(out, expected):
                raise SystemExit(f"{name}: wrong running sums")
            best[name] = min(best.get(name, seconds), seconds)
    base, ref = best["CPython dict loop (baseline)"], best["numpy (reference)"]
    print(
        f"W2: {args.rows:,} rows, {args.keys:,} keys, {BATCH:,}-row batches, best of "
        f"{args.repeat}; every output equals the dict loop's"
    )
    print("| variant | seconds | M records/s | vs dict loop | vs numpy |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, seconds in best.items():
        rate = args.rows / seconds / 1e6
        ratios = f"{base / seconds:.2f}x | {ref / seconds:.2f}x"
        print(f"| {name} | {seconds:.3f} | {rate:.2f} | {ratios} |")


if __name__ == "__main__":
    main()
