"""The partially finished jobs the FLIP-147 tests run.

``build``: two sequences of different lengths connected into a keyed co-process function
-> FileSink; the short one passes a relay vertex (a rebalanced map) first, so a finished
vertex with inputs is skipped too. The short sequence (ids 0..599, 300 per epoch) ends in
epoch 2, the long one (ids 0..2999) in epoch 10. The function keeps a running sum per key
and input, emits each row with it, and registers an event-time timer far in the future:
it fires when both inputs ended (MAX_WATERMARK on both), emitting one row per key with id
-1 and both totals.

``build_lanes``: one source whose two subtasks run out at different times (subtask 0
after epoch 1, subtask 1 after epoch 5) -> a chained map -> keyed running sums -> FileSink.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from unbounded_jobs import RunningSumUntilTheEnd

from flintlock import (
    CoProcessFunction,
    SourceReader,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.sources.epochs import EpochSplits, UnboundedSource
from flintlock.core.sources.sequence import SEQUENCE_SCHEMA, SequenceSource
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


def one_pass() -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The reference in plain Python: every (input, id) once, and each (key, input)'s
    total over all of them."""
    rows = [(1, i) for i in range(SHORT_END)] + [(2, i) for i in range(LONG_END)]
    totals: dict[tuple[int, int], int] = {}
    for which, i in rows:
        totals[(i % KEYS, which)] = totals.get((i % KEYS, which), 0) + i
    return sorted(rows), sorted((k, which, t) for (k, which), t in totals.items())


# ---- one source, two subtasks that run out at different times ----

LANES = [150, 750]
"""Rows of subtask 0 (its lane: ids 0, 2, 4, ...) and of subtask 1 (ids 1, 3, 5, ...)."""
LANE_ROWS_PER_EPOCH = 150
LANE_KEYS = 4
"""Keys id % 4: 0 and 2 come from subtask 0 only, 1 and 3 from subtask 1 only, so each
key's rows arrive in order on one channel and its running sums are exact."""


class _LaneReader(SourceReader):
    """Reads rows ``[first, last)`` of lane ``lane``: ids ``lane + 2 * row``."""

    def __init__(self, lane: int, splits: list[Any]) -> None:
        self.lane = lane
        self.splits = splits
        self.read_up_to: dict[str, int] = {}

    def read(self) -> Any:
        for first, last in self.splits:
            ids = [self.lane + 2 * row for row in range(first, last)]
            self.read_up_to[f"{first}-{last}"] = last
            yield pa.RecordBatch.from_pydict({"id": ids, "event_time": ids}, schema=SEQUENCE_SCHEMA)

    def positions(self) -> dict[str, int]:
        return dict(self.read_up_to)


class Lanes(UnboundedSource):
    """Subtask s reads lane s, LANE_ROWS_PER_EPOCH rows an epoch; a subtask whose lane is
    read to its end is exhausted alone (``exhausted_subtasks``), the other goes on."""

    name = "lanes"
    schema = SEQUENCE_SCHEMA

    def initial_state(self, now_ms: int) -> dict[str, Any]:
        return {"read": [0] * len(LANES)}

    def plan_epoch(self, state: Any, now_ms: int, parallelism: int) -> EpochSplits:
        if parallelism != len(LANES):
            raise ValueError(f"Lanes runs with parallelism {len(LANES)}, not {parallelism}")
        read, assignments = list(state["read"]), []
        for lane, rows in enumerate(LANES):
            upto = min(rows, read[lane] + LANE_ROWS_PER_EPOCH)
            assignments.append([[read[lane], upto]] if upto > read[lane] else [])
            read[lane] = upto
        exhausted = [done >= rows for done, rows in zip(read, LANES, strict=True)]
        return EpochSplits(assignments, {"read": read}, exhausted_subtasks=exhausted)

    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[Any]
    ) -> SourceReader:
        return _LaneReader(subtask_index, splits)


def build_lanes(spark: Any, base: str, plugins: list[Any] = ()) -> StreamExecutionEnvironment:
    """Lanes -> a chained map ("tag") -> keyed running sums -> FileSink."""
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk", plugins=list(plugins)
    )
    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    lanes = env.from_source(Lanes(), strategy, name="lanes")
    tagged = lanes.map_batch(same_batch, name="tag", output_schema=SEQUENCE_SCHEMA)
    keyed = tagged.key_by(lambda row: row["id"] % LANE_KEYS)
    sums = keyed.process(RunningSumUntilTheEnd(), name="sums")
    sums.sink_to(FileSink(f"{base}/out"), name="files")
    return env


def lanes_reference() -> list[tuple[int, int, int]]:
    """Every output row, in plain Python: (k, id, running total) per row in lane order,
    then (k, -1, total) once per key."""
    rows, totals = [], {}
    for lane, count in enumerate(LANES):
        for row in range(count):
            i = lane + 2 * row
            k = i % LANE_KEYS
            totals[k] = totals.get(k, 0) + i
            rows.append((k, i, totals[k]))
    return sorted(rows + [(k, -1, total) for k, total in totals.items()])
