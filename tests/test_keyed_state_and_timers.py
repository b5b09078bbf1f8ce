"""Keyed value state and event-time timers across checkpoint and restore, in the harness."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flintlock import (
    KeyedProcessFunction,
    LifecycleError,
    ListStateDescriptor,
    ValueStateDescriptor,
)
from flintlock.core.exchange.key_groups import key_group_of, key_group_range, subtask_for_key_group
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import LifecycleRecorder, OneInputHarness

MAX = 2**63 - 1


class SumUntilQuiet(KeyedProcessFunction):
    """Sums ``v`` per key; 10 time units after a key's latest record, emits its sum."""

    def open(self) -> None:
        ctx = self.runtime_context
        self.total = ctx.get_state(ValueStateDescriptor("total", pa.int64(), default=0))
        self.deadline = ctx.get_state(ValueStateDescriptor("deadline", pa.int64()))

    def process_element(self, value, ctx, out):  # type: ignore[no-untyped-def]
        self.total.update(self.total.value() + value["v"])
        if self.deadline.value() is not None:
            ctx.timer_service().delete_event_time_timer(self.deadline.value())
        self.deadline.update(ctx.timestamp() + 10)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)

    def on_timer(self, timestamp, ctx, out):  # type: ignore[no-untyped-def]
        out.collect({"k": ctx.get_current_key(), "total": self.total.value(), "at": timestamp})
        self.total.clear()
        self.deadline.clear()


def summing() -> KeyedProcessOperator:
    return KeyedProcessOperator(SumUntilQuiet(), key_column="k", timestamp_column="t", name="sum")


def rows(*triples: tuple[str, int, int]) -> list[dict[str, object]]:
    return [{"k": k, "v": v, "t": t} for k, v, t in triples]


def test_value_state_and_timers_survive_checkpoint_and_restore(
    recorder: LifecycleRecorder,
) -> None:
    first = OneInputHarness(summing())
    first.process_records(rows(("a", 1, 0), ("b", 5, 2), ("a", 2, 4)))
    first.process_watermark(12)  # fires b's timer at 12, a's is at 14
    assert first.output_rows() == [{"k": "b", "total": 5, "at": 12}]
    snapshot = first.checkpoint(1)
    sum_state = snapshot.operator("sum")
    assert sum_state is not None and sum_state.timers is not None
    assert {f.name for f in sum_state.keyed} == {"total", "deadline"}

    restored = OneInputHarness(summing(), restore_from=snapshot, plugins=[recorder])
    restored.process_records(rows(("a", 4, 6), ("c", 7, 30)))  # a's deadline moves to 16
    restored.process_watermark(15)
    assert restored.output_rows() == []  # a's old timer at 14 was deleted with its state
    restored.end_input()  # MAX_WATERMARK first: every pending timer fires before end_input
    assert restored.output_rows() == [
        {"k": "a", "total": 7, "at": 16},
        {"k": "c", "total": 7, "at": 40},
    ]
    calls = recorder.calls(exclude={"state", "task"})
    assert calls[-5:] == [
        ("operator_process_watermark", "sum", 15),
        ("operator_process_watermark", "sum", MAX),
        ("operator_end_input", "sum", 1),
        ("operator_finish", "sum"),  # the input ended: finish right away, then the barrier
        ("function_finish", "sum"),
    ]
    restored.complete(2)
    assert restored.watermarks == [15, MAX]


def test_timers_registered_during_finish_never_fire() -> None:
    class LateTimer(KeyedProcessFunction):
        def process_element(self, value, ctx, out):  # type: ignore[no-untyped-def]
            self.ctx = ctx

        def finish(self) -> None:
            self.ctx.timer_service().register_event_time_timer(0)

        def on_timer(self, timestamp, ctx, out):  # type: ignore[no-untyped-def]
            out.collect({"fired": timestamp})

    operator = KeyedProcessOperator(LateTimer(), key_column="k")
    harness = OneInputHarness(operator)
    harness.process_records([{"k": "x"}])
    snapshot = harness.complete()
    assert harness.output_rows() == []
    assert operator.timer_service().pending() == 1  # accepted, in the final snapshot
    assert snapshot.operator("keyed_process").timers is not None  # type: ignore[union-attr]


def test_keyed_state_snapshot_is_arrow_with_key_groups() -> None:
    harness = OneInputHarness(summing())
    harness.process_records(rows(("a", 1, 0), ("b", 2, 0)))
    snapshot = harness.checkpoint(1)
    total = next(f for f in snapshot.operator("sum").keyed if f.name == "total")  # type: ignore[union-attr]
    table = pa.ipc.open_file(total.path).read_all().sort_by("key")
    assert table.column("key").to_pylist() == ["a", "b"]
    assert table.column("value").to_pylist() == [1, 2]
    assert table.column("key_group").to_pylist() == [key_group_of("a"), key_group_of("b")]


def test_restore_at_another_parallelism_keeps_only_owned_key_groups() -> None:
    keys = [f"key-{i}" for i in range(40)]
    whole = OneInputHarness(summing())
    whole.process_records([{"k": k, "v": 1, "t": 0} for k in keys])
    snapshot = whole.checkpoint(1)

    outputs = []
    for subtask in range(2):
        half = OneInputHarness(
            summing(), restore_from=snapshot, parallelism=2, subtask_index=subtask
        )
        half.end_input()
        outputs.append({row["k"] for row in half.output_rows()})
        owned = key_group_range(subtask, 2, 128)
        assert all(key_group_of(k) in owned for k in outputs[-1])
    assert outputs[0] | outputs[1] == set(keys) and not outputs[0] & outputs[1]


def test_a_key_outside_the_subtask_key_groups_is_an_error() -> None:
    foreign = next(
        k for k in (f"k{i}" for i in range(100)) if subtask_for_key_group(key_group_of(k), 2, 128)
    )
    harness = OneInputHarness(summing(), parallelism=2, subtask_index=0)
    with pytest.raises(LifecycleError) as caught:
        harness.process_records(rows((foreign, 1, 0)))
    assert "not in this subtask's 0..63" in str(caught.value.__cause__)
    assert caught.value.operator == "sum" and caught.value.phase == "run"


def test_key_groups_are_stable_and_typed() -> None:
    # murmur3_32 of the key's bytes: fixed across processes, never Python's salted hash()
    assert key_group_of("a") == key_group_of("a") and key_group_of(7) == key_group_of(7)
    assert [key_group_range(i, 3, 128) for i in range(3)] == [
        range(0, 43),
        range(43, 86),
        range(86, 128),
    ]
    assert all(subtask_for_key_group(g, 3, 128) == 0 for g in range(43))
    with pytest.raises(TypeError, match="cannot be hashed stably"):
        key_group_of(1.5)


def test_operator_list_state_survives_restore() -> None:
    from flintlock import OneInputStreamOperator

    class CountBatches(OneInputStreamOperator):
        def initialize_state(self) -> None:
            self.seen = self.context.operator_state.get_list_state(
                ListStateDescriptor("seen", pa.int64())
            )

        def process_batch(self, batch: pa.RecordBatch) -> None:
            self.seen.add(batch.num_rows)

        def finish(self) -> None:
            self.output.emit(pa.record_batch({"sizes": [self.seen.get()]}))

    first = OneInputHarness(CountBatches("count"))
    first.process_records([{"v": 1}, {"v": 2}])
    again = OneInputHarness(CountBatches("count"), restore_from=first.checkpoint(1))
    again.process_records([{"v": 3}])
    again.complete(2)
    assert again.output_rows() == [{"sizes": [2, 1]}]


@pytest.mark.parametrize("encoding", ["plain", "dictionary"])
def test_a_key_column_of_any_encoding_keys_state_and_refuses_foreign_keys(encoding: str) -> None:
    # plain key columns take Arrow's distinct values for the key-group check, others
    # (here dictionary-encoded) the per-row keys: the same state, the same refusal
    def batch_of(triples: list[tuple[str, int, int]]) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pylist(rows(*triples))
        if encoding == "dictionary":
            keys = batch.column("k").dictionary_encode()
            batch = batch.set_column(0, "k", keys)
        return batch

    harness = OneInputHarness(summing())
    harness.process_batch(batch_of([("a", 1, 0), ("b", 5, 2), ("a", 2, 4)]))
    harness.process_watermark(20)
    assert sorted((r["k"], r["total"]) for r in harness.output_rows()) == [("a", 3), ("b", 5)]
    foreign = next(
        k for k in (f"k{i}" for i in range(100)) if subtask_for_key_group(key_group_of(k), 2, 128)
    )
    half = OneInputHarness(summing(), parallelism=2, subtask_index=0)
    with pytest.raises(LifecycleError) as caught:
        half.process_batch(batch_of([(foreign, 1, 0)]))
    assert "not in this subtask's 0..63" in str(caught.value.__cause__)
