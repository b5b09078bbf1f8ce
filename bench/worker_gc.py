"""What CPython's collector costs a keyed operator with large state: Nexmark q17's batch
operator (per auction and day, counts in value state) fed the bids of N events in the
test harness, then a snapshot, at CPython's default thresholds and at flintlock's worker
thresholds (``core/spark/stage.py: TASK_GC_THRESHOLDS``), each in a fresh process.

    python bench/worker_gc.py [--events 4000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def measure(events: int, thresholds: tuple[int, int, int]) -> dict[str, float]:
    """Seconds to process the bids of ``events`` events and to snapshot the state."""
    sys.path.insert(0, str(BENCH))
    from nexmark.model import KINDS, Generator, NexmarkConfig, events_of_kind
    from nexmark.queries.aggregates import AuctionStats, _with_day

    from flintlock.operators.batch_process import KeyedBatchProcessOperator
    from flintlock.testing import OneInputHarness

    generator, bid = Generator(NexmarkConfig()), KINDS["bid"]
    batches = [
        _with_day(generator.batch(bid, events_of_kind(low, low + 65_536, bid)))
        for low in range(0, events, 65_536)
    ]
    operator = KeyedBatchProcessOperator(AuctionStats(), key_column=["auction", "day"])
    harness = OneInputHarness(operator)
    gc.collect()
    gc.set_threshold(*thresholds)
    start = time.perf_counter()
    for batch in batches:
        harness.process_batch(batch)
    processed = time.perf_counter()
    harness.checkpoint(1)
    return {"process": processed - start, "snapshot": time.perf_counter() - processed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        thresholds = tuple(json.loads(args.child))
        print(json.dumps(measure(args.events, thresholds)))  # type: ignore[arg-type]
        return
    from flintlock.core.spark.stage import TASK_GC_THRESHOLDS

    settings = {"CPython's defaults": (700, 10, 10), "flintlock's": TASK_GC_THRESHOLDS}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in settings}
    for _ in range(args.runs):
        for name, thresholds in settings.items():  # alternated: drift hits both alike
            command = [sys.executable, __file__, "--events", str(args.events)]
            done = subprocess.run(
                [*command, "--child", json.dumps(thresholds)],
                capture_output=True,
                text=True,
                check=True,
            )
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"q17's keyed operator, {args.events:,} events, median of {args.runs} runs")
    base = {
        k: statistics.median(r[k] for r in results["CPython's defaults"])
        for k in ("process", "snapshot")
    }
    for name, runs in results.items():
        process = statistics.median(r["process"] for r in runs)
        snapshot = statistics.median(r["snapshot"] for r in runs)
        print(
            f"  {name:<20} {settings[name]!s:<18} process {process:6.2f} s "
            f"({process / base['process']:.2f}x)  snapshot {snapshot:6.2f} s "
            f"({snapshot / base['snapshot']:.2f}x)"
        )


if __name__ == "__main__":
    main()
