"""Event-time timers of a KeyedBatchProcessFunction: registered per batch for many keys at
once, fired a watermark at a time into ``on_timers`` (in time order, each distinct
(key, time) once), restored from a checkpoint, and all fired when the input ends."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flintlock import (
    KeyedBatchProcessFunction,
    LifecycleError,
    ValueStateDescriptor,
)
from flintlock.operators.batch_process import KeyedBatchProcessOperator
from flintlock.testing import OneInputHarness

OUT = pa.schema([("k", pa.string()), ("due", pa.int64()), ("total", pa.int64())])
IN = pa.schema([("k", pa.string()), ("v", pa.int64()), ("due", pa.int64())])


class TotalsWhenDue(KeyedBatchProcessFunction):
    """Adds ``v`` to its key's total and asks for the total at event time ``due``."""

    output_schema = OUT

    def __init__(self) -> None:
        self.calls: list[str] = []

    def open(self) -> None:
        self.total = self.runtime_context.get_state(
            ValueStateDescriptor("total", pa.int64(), default=0)
        )

    def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> None:
        self.calls.append(f"process_batch {batch.num_rows}")
        sums = pa.table({"k": keys, "v": batch.column("v")}).group_by("k").aggregate([("v", "sum")])
        users = sums.column("k").combine_chunks()
        totals = pc.add(self.total.values(users), sums.column("v_sum").combine_chunks())
        self.total.update_values(users, totals)
        ctx.register_event_time_timers(keys, batch.column("due"))

    def on_timers(self, timestamps: pa.Array, keys: pa.Array, ctx: Any) -> pa.RecordBatch:
        self.calls.append(f"on_timers {timestamps.to_pylist()} wm={ctx.current_watermark()}")
        return pa.RecordBatch.from_arrays([keys, timestamps, self.total.values(keys)], schema=OUT)


def harness(function: KeyedBatchProcessFunction, **kwargs: Any) -> OneInputHarness:
    return OneInputHarness(
        KeyedBatchProcessOperator(function, key_column="k", name="due"), **kwargs
    )


def records(*rows: tuple[str, int, int]) -> list[dict[str, Any]]:
    return [{"k": k, "v": v, "due": due} for k, v, due in rows]


def test_timers_fire_per_watermark_in_time_order_each_pair_once() -> None:
    function = TotalsWhenDue()
    run = harness(function)
    run.process_records(records(("a", 1, 20), ("b", 2, 10), ("a", 3, 20), ("c", 4, 30)), schema=IN)
    run.process_watermark(5)  # nothing due
    run.process_watermark(20)
    run.process_records(records(("c", 5, 30), ("b", 6, 25)), schema=IN)
    run.process_watermark(40)
    assert function.calls == [
        "process_batch 4",
        "on_timers [10, 20] wm=20",
        "process_batch 2",
        "on_timers [25, 30] wm=40",
    ]
    assert [(r["k"], r["due"], r["total"]) for r in run.output_rows()] == [
        ("b", 10, 2),
        ("a", 20, 4),
        ("b", 25, 8),
        ("c", 30, 9),
    ]
    assert run.watermarks == [5, 20, 40]


def test_timers_are_restored_from_a_checkpoint_and_fire_at_the_end_of_input() -> None:
    first = harness(TotalsWhenDue())
    first.process_records(records(("a", 1, 100), ("b", 2, 50), ("a", 3, 70)), schema=IN)
    first.process_watermark(60)
    function = TotalsWhenDue()
    second = harness(function, restore_from=first.checkpoint(1))
    second.process_records(records(("b", 10, 200)), schema=IN)
    second.complete(2)  # the end of input: MAX_WATERMARK fires every timer left
    assert [(r["k"], r["due"], r["total"]) for r in first.output_rows()] == [("b", 50, 2)]
    assert [(r["k"], r["due"], r["total"]) for r in second.output_rows()] == [
        ("a", 70, 4),
        ("a", 100, 4),
        ("b", 200, 12),
    ]
    assert function.calls[-1].startswith("on_timers [70, 100, 200] wm=")


def test_a_function_with_timers_but_no_on_timers_fails_naming_it() -> None:
    class NoHandler(KeyedBatchProcessFunction):
        def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> None:
            ctx.register_event_time_timers(keys, batch.column("due"))

    run = harness(NoHandler())
    run.process_records(records(("a", 1, 10)), schema=IN)
    with pytest.raises(LifecycleError, match="NoHandler registers event-time timers but does"):
        run.process_watermark(10)


def test_timer_keys_and_timestamps_must_pair_up() -> None:
    class Mismatched(TotalsWhenDue):
        def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> None:
            ctx.register_event_time_timers(keys, pa.array([1]))

    run = harness(Mismatched())
    with pytest.raises(LifecycleError, match="2 keys but 1 timer timestamps"):
        run.process_records(records(("a", 1, 10), ("b", 1, 10)), schema=IN)
