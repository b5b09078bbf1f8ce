"""What a watermark strategy and the processing-time check cost a source task.

A source task (``SourceHarness``, no Spark) reads 10,000,000 rows of out-of-order event
time (ts = i - ((i*7919) % 500)) in 65,536-row batches and passes them to a no-op
operator. The baseline reads the same batches with no strategy; the cases add bounded
out-of-orderness (a watermark per batch), the same with idleness, and
``with_interval(rows=1000)`` (batches sliced, a watermark per 1,000 rows). Rounds are
interleaved across cases; the table shows the minimum and median ms per run and the
ratio of each minimum to the baseline's, and the added time per row. The baseline
passes zero-copy batches to a no-op, so it is almost only per-batch overhead: read the
ratio with that in mind, and the added ns per row against what real operators cost.

    python bench/event_time.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pyarrow as pa

from flintlock import OneInputStreamOperator, WatermarkStrategy
from flintlock.core.sources.source import CollectionSource, SourceOperator
from flintlock.testing import SourceHarness

ROWS = 10_000_000


class Sink(OneInputStreamOperator):
    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.rows = getattr(self, "rows", 0) + batch.num_rows


def table() -> pa.Table:
    i = np.arange(ROWS, dtype=np.int64)
    return pa.table({"k": i % 1000, "ts": i - (i * 7919) % 500})


def case(data: pa.Table, strategy: WatermarkStrategy | None) -> Callable[[], int]:
    def run() -> int:
        sink = Sink("sink")
        SourceHarness(SourceOperator(CollectionSource(data), strategy), sink).run()
        return sink.rows

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    data = table()
    bounded = WatermarkStrategy("ts", 500)
    cases = {
        "no strategy (baseline)": case(data, None),
        "bounded out-of-orderness": case(data, bounded),
        "bounded + idleness": case(data, bounded.with_idleness(timedelta(seconds=5))),
        "bounded, interval 1000 rows": case(data, bounded.with_interval(rows=1000)),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, run in cases.items():
            gc.collect()
            gc.disable()
            start = time.perf_counter_ns()
            assert run() == ROWS
            samples[name].append((time.perf_counter_ns() - start) / 1e6)
            gc.enable()
    base = min(samples["no strategy (baseline)"])
    print("| case | min ms | median ms | vs baseline | added ns per row |")
    print("|---|---:|---:|---:|---:|")
    for name, values in samples.items():
        added = (min(values) - base) * 1e6 / ROWS
        print(
            f"| {name} | {min(values):.1f} | {statistics.median(values):.1f} | "
            f"{min(values) / base:.2f}x | {added:.2f} |"
        )


if __name__ == "__main__":
    main()
