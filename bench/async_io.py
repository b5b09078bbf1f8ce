"""Benchmark async I/O: calls of 100 ms each, capacity 100, against a blocking per-record
function and against a plain asyncio loop making the same calls.

Every variant makes the same call per row (``asyncio.sleep(latency)`` standing in for a
service that answers in ``--latency-ms``; the blocking one ``time.sleep``). In-process
(one subtask in a harness, the real task lifecycle, no Spark): flintlock's
``unordered_wait`` and ``ordered_wait`` against ``asyncio.gather`` over the rows with a
semaphore of ``--capacity`` (the baseline), and a blocking ``map`` over ``--blocking-rows``
rows (it would take ``rows x latency`` otherwise). ``--spark`` adds the whole job on local
Spark at parallelism 1 (start-up of the Spark job included). Medians of ``--runs``,
interleaved; records/s and the ratio to the asyncio loop.

    python bench/async_io.py [--rows 5000] [--latency-ms 100] [--capacity 100] [--runs 3] [--spark]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import pyarrow as pa
from timing import local_session, timed

from flintlock import AsyncDataStream, StreamExecutionEnvironment
from flintlock.operators.async_io import AsyncWaitOperator
from flintlock.operators.basic import MapOperator
from flintlock.testing import OneInputHarness

BATCH_ROWS = 1000


def service(latency: float) -> Any:
    """The call every async variant makes per row."""

    async def call(row: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(latency)
        return {"id": row["id"], "answer": row["id"] + 1}

    return call


def batches(rows: int) -> list[pa.RecordBatch]:
    ids = pa.array(range(rows), pa.int64())
    return [pa.record_batch({"id": ids.slice(i, BATCH_ROWS)}) for i in range(0, rows, BATCH_ROWS)]


def asyncio_loop(rows: int, latency: float, capacity: int) -> int:
    """The baseline: one event loop, ``capacity`` calls at once, every row once."""
    call = service(latency)

    async def main() -> int:
        gate = asyncio.Semaphore(capacity)

        async def one(i: int) -> dict[str, Any]:
            async with gate:
                return await call({"id": i})

        answers = await asyncio.gather(*(one(i) for i in range(rows)))
        return len(answers)

    return asyncio.run(main())


def flintlock_harness(rows: int, latency: float, capacity: int, ordered: bool) -> int:
    """One subtask: the async operator in a harness, fed ``rows`` in 1,000-row batches."""
    operator = AsyncWaitOperator(
        service(latency), timeout_ms=60_000, capacity=capacity, ordered=ordered
    )
    harness = OneInputHarness(operator)
    for batch in batches(rows):
        harness.process_batch(batch)
    harness.complete(1)
    return harness.output().num_rows


def blocking_map(rows: int, latency: float) -> int:
    """A per-record map that waits for each answer."""

    def call(row: dict[str, Any]) -> dict[str, Any]:
        time.sleep(latency)
        return {"id": row["id"], "answer": row["id"] + 1}

    harness = OneInputHarness(MapOperator(call))
    for batch in batches(rows):
        harness.process_batch(batch)
    harness.complete(1)
    return harness.output().num_rows


def flintlock_spark(rows: int, latency: float, capacity: int) -> int:
    env = StreamExecutionEnvironment(parallelism=1)
    stream = env.from_collection([{"id": i} for i in range(rows)])
    looked_up = AsyncDataStream.unordered_wait(stream, service(latency), 60_000, capacity)
    return looked_up.collect(job_name="async-bench").num_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--blocking-rows", type=int, default=30)
    parser.add_argument("--latency-ms", type=int, default=100)
    parser.add_argument("--capacity", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spark", action="store_true")
    args = parser.parse_args()
    rows, latency, capacity = args.rows, args.latency_ms / 1000, args.capacity
    variants = {
        "asyncio loop (baseline)": lambda: asyncio_loop(rows, latency, capacity),
        "flintlock unordered_wait": lambda: flintlock_harness(rows, latency, capacity, False),
        "flintlock ordered_wait": lambda: flintlock_harness(rows, latency, capacity, True),
    }
    if args.spark:
        local_session()
        variants["flintlock unordered_wait on Spark"] = lambda: flintlock_spark(
            rows, latency, capacity
        )
    results = timed(args.runs, variants)
    blocking = timed(1, {"blocking map": lambda: blocking_map(args.blocking_rows, latency)})
    base_rate = rows / results["asyncio loop (baseline)"][0]
    print(f"{rows} rows, {args.latency_ms} ms per call, capacity {capacity}")
    print(f"{'variant':36} {'records/s':>10} {'vs asyncio':>10}")
    for name, (seconds, count) in results.items():
        assert count == rows, f"{name} answered {count} of {rows} rows"
        rate = rows / seconds
        print(f"{name:36} {rate:10.1f} {rate / base_rate:9.2f}x")
    seconds, count = blocking["blocking map"]
    assert count == args.blocking_rows
    blocking_rate = args.blocking_rows / seconds
    unordered = rows / results["flintlock unordered_wait"][0]
    print(f"{'blocking map':36} {blocking_rate:10.1f} {blocking_rate / base_rate:9.2f}x")
    print(f"unordered_wait vs blocking map: {unordered / blocking_rate:.1f}x")


if __name__ == "__main__":
    main()
