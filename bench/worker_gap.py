"""Benchmark a long pause between epochs: Spark stops Python workers idle for a minute,
so an epoch after a longer pause pays new ones unless the run keeps them alive
(core/spark/keep_alive.py). Same session, same job, keep-alive off then on.

Each variant runs an unbounded job of 3 epochs ``--gap`` seconds apart (processing-time
trigger), ``--rows`` ids per epoch through a batch map that tags each row with its Python
worker's pid. Prints each epoch's seconds and the workers it ran on: with keep-alive off
the epochs after the pause run on new workers and take longer; with it on they run on
the same workers as the first. Every variant's ids are checked (each once).

    python bench/worker_gap.py [--gap 90] [--rows 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import local_session

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.core.spark.keep_alive import KEEP_ALIVE_ENV

SCHEMA = pa.schema([("id", pa.int64()), ("pid", pa.int64())])


def tag_pid(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch's ids and the pid of the Python worker that ran it."""
    pids = pa.array([os.getpid()] * batch.num_rows, pa.int64())
    return pa.record_batch([batch.column("id"), pids], schema=SCHEMA)


def run(spark: Any, scratch: str, gap: float, rows: int, keep_alive: str) -> list[dict[str, Any]]:
    """One job of three epochs ``gap`` apart; per epoch its seconds and worker pids."""
    os.environ[KEEP_ALIVE_ENV] = keep_alive
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=scratch)
    stream = env.from_sequence(end=3 * rows, rows_per_epoch=rows)
    stream = stream.map_batch(tag_pid, output_schema=SCHEMA)
    stream.sink_to(env.registry.get("sink", "collect")(name="out", schema=SCHEMA), name="out")
    epochs: list[dict[str, Any]] = []
    result = env.execute(
        f"gap-{uuid.uuid4().hex[:8]}",
        trigger=EpochTrigger.processing_time(gap),
        progress=epochs.append,
    )
    table = result.collected["out"]
    assert sorted(table.column("id").to_pylist()) == list(range(3 * rows)), "ids lost or twice"
    ids, pids = table.column("id").to_pylist(), table.column("pid").to_pylist()
    for figures in epochs:
        low = (figures["epoch"] - 1) * rows
        seen = {p for i, p in zip(ids, pids, strict=True) if low <= i < low + rows}
        figures["pids"] = sorted(seen)
    return epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gap", type=float, default=90.0)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    spark = local_session()
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    run(spark, scratch, 0.0, args.rows, "0")  # warm-up: workers started, imports done
    print(f"3 epochs of {args.rows:,} ids, {args.gap:.0f} s apart, parallelism 2, local[2]")
    for label, keep_alive in (("keep-alive off", "0"), ("keep-alive on", "")):
        epochs = run(spark, scratch, args.gap, args.rows, keep_alive)
        first = epochs[0]["pids"]
        for figures in epochs:
            same = "same workers as epoch 1" if figures["pids"] == first else "NEW workers"
            print(
                f"{label:<15} epoch {figures['epoch']}: {figures['seconds']:.2f} s "
                f"({figures['seconds'] / epochs[0]['seconds']:.2f}x epoch 1), "
                f"workers {figures['pids']}: {same}"
            )
    spark.stop()


if __name__ == "__main__":
    main()
