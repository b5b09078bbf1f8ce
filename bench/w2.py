"""W2: key_by key -> running sum in ValueState, one output row per record.

In-process, on one core: flintlock's real one-input task in a harness (no Spark), fed
65,536-row batches, per record (KeyedProcessFunction) and per batch
(KeyedBatchProcessFunction with ``values`` / ``update_values``), on each state backend;
against a CPython dict loop and numpy, measured in the same run. Every variant's output
is checked against the dict loop's.

    python bench/w2.py [--rows 2000000] [--keys 10000] [--backends hashmap,sqlite]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from state_functions import BatchRunningSum, RunningSum, running_sums

from flintlock.operators.batch_process import KeyedBatchProcessOperator
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import OneInputHarness

BATCH = 65536


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--backends", default="hashmap,sqlite")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
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
