"""The partially finished job the FLIP-147 tests run: two sequences of different lengths
connected into a keyed co-process function -> FileSink; the short one passes a relay
vertex (a rebalanced map) first, so a finished vertex with inputs is skipped too.

The short sequence (ids 0..599, 300 per epoch) ends in epoch 2, the long one (ids
0..2999) in epoch 10. The function keeps a running sum per key and input, emits each row
with it, and registers an event-time timer far in the future: it fires when both inputs
ended (MAX_WATERMARK on both), emitting one row per key with id -1 and both totals.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flintlock import CoProcessFunction, ValueStateDescriptor, WatermarkStrategy
from flintlock.core.environment import StreamExecutionEnvironment
from flintlock.core.sequence_source import SEQUENCE_SCHEMA, SequenceSource
from flintlock.sinks.files import FileSink
from flintlock.testing import LifecycleRecorder

KEYS = 5
SHORT_END, LONG_END, PER_EPOCH = 600, 3000, 300
OUT = pa.schema(
    [("k", pa.int64()), ("input", pa.int64()), ("id", pa.int64()), ("total", pa.int64())]
)
FAR = 10**12
"""The timers' time: after every row's event time, before MAX_WATERMARK."""


class SumsPerInput(CoProcessFunction):
    """Each row with its key's running sum of its input; both totals once both ended."""

    output_schema = OUT

    def open(self) -> None:
        self.totals = [
            self.runtime_context.get_state(ValueStateDescriptor(f"total{i}", pa.int64(), default=0))
            for i in (1, 2)
        ]

    def _process(self, value: dict[str, Any], ctx: Any, out: Any, which: int) -> None:
        total = self.totals[which - 1]
        total.update(total.value() + value["id"])
        ctx.timer_service().register_event_time_timer(FAR)
        out.collect(
            {"k": value["id"] % KEYS, "input": which, "id": value["id"], "total": total.value()}
        )

    def process_element1(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self._process(value, ctx, out, 1)

    def process_element2(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self._process(value, ctx, out, 2)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        key = ctx.get_current_key()
        for which in (1, 2):
            out.collect(
                {"k": key, "input": which, "id": -1, "total": self.totals[which - 1].value()}
            )


class EpochRecorder(LifecycleRecorder):
    """A LifecycleRecorder whose every call ends with the epoch (checkpoint id) it ran in."""

    def _record(self, hook: str, task: Any, *call: Any) -> None:
        super()._record(hook, task, *call, task.epoch)


def same_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The relay's map: a vertex of its own behind the short source, that finishes with it."""
    return batch


def build(spark: Any, base: str, plugins: list[Any] = ()) -> StreamExecutionEnvironment:
    """The job: the short sequence (through a relay vertex) into input 1, the long one
    into input 2."""
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk", plugins=list(plugins)
    )
    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    short = env.from_source(
        SequenceSource(end=SHORT_END, rows_per_epoch=PER_EPOCH), strategy, name="short"
    ).rebalance()
    short = short.map_batch(same_batch, name="relay", output_schema=SEQUENCE_SCHEMA)
    long = env.from_source(
        SequenceSource(end=LONG_END, rows_per_epoch=PER_EPOCH), strategy, name="long"
    )
    keyed = (
        short.key_by(lambda row: row["id"] % KEYS)
        .connect(long.key_by(lambda row: row["id"] % KEYS))
        .process(SumsPerInput(), name="sums")
    )
    keyed.sink_to(FileSink(f"{base}/out"), name="files")
    return env


def committed_rows(base: str) -> list[dict[str, Any]]:
    """Every row the FileSink committed, across all runs."""
    if not os.path.isdir(f"{base}/out"):
        return []
    return pq.read_table(f"{base}/out").to_pylist()


def one_pass() -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The reference in plain Python: every (input, id) once, and each (key, input)'s
    total over all of them."""
    rows = [(1, i) for i in range(SHORT_END)] + [(2, i) for i in range(LONG_END)]
    totals: dict[tuple[int, int], int] = {}
    for which, i in rows:
        totals[(i % KEYS, which)] = totals.get((i % KEYS, which), 0) + i
    return sorted(rows), sorted((k, which, t) for (k, which), t in totals.items())
