"""Timers of both time domains in the harness: exact on_timer sequences, timestamp order,
dedup, delete, the timer context, snapshot and restore, and the finish rules."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from flintlock import KeyedProcessFunction, OutputTag, TimeDomain
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import LifecycleRecorder, OneInputHarness, TwoInputHarness

MAX = 2**63 - 1
FIRED = pa.schema(
    [("key", pa.string()), ("at", pa.int64()), ("domain", pa.string()), ("ts", pa.int64())]
)
REARMED = OutputTag("rearmed", pa.schema([("key", pa.string()), ("at", pa.int64())]))


class Timers(KeyedProcessFunction):
    """Registers or deletes a timer per record, as the record says; reports each firing."""

    output_schema = FIRED

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        service = ctx.timer_service()
        action = {
            "event": service.register_event_time_timer,
            "proc": service.register_processing_time_timer,
            "del_event": service.delete_event_time_timer,
            "del_proc": service.delete_processing_time_timer,
        }[value["op"]]
        action(value["at"])

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        domain = ctx.time_domain()
        out.collect(
            {
                "key": ctx.get_current_key(),
                "at": timestamp,
                "domain": domain.value,
                "ts": ctx.timestamp(),
            }
        )
        if ctx.get_current_key() == "rearm" and timestamp < 1000:
            # a timer registered while timers fire, at or below the same time: same pass
            if domain is TimeDomain.EVENT_TIME:
                ctx.timer_service().register_event_time_timer(timestamp + 1)
            else:
                ctx.timer_service().register_processing_time_timer(timestamp + 1)
            ctx.output(REARMED, {"key": "rearm", "at": timestamp + 1})


def operator() -> KeyedProcessOperator:
    return KeyedProcessOperator(Timers(), key_column="key", name="timers")


def records(*rows: tuple[str, str, int]) -> list[dict[str, Any]]:
    return [{"key": k, "op": op, "at": at} for k, op, at in rows]


def fired(harness: OneInputHarness) -> list[tuple[str, int, str]]:
    return [(r["key"], r["at"], r["domain"]) for r in harness.output_rows()]


def test_both_domains_fire_in_timestamp_order_once_each_and_survive_restore() -> None:
    first = OneInputHarness(operator())
    first.process_records(
        records(
            ("a", "event", 30),
            ("b", "event", 10),
            ("a", "event", 30),  # the same timer again: registered once
            ("c", "event", 5),
            ("a", "proc", 200),
            ("b", "proc", 100),
            ("b", "proc", 100),
            ("c", "proc", 90),
            ("c", "del_event", 5),  # deleted before it could fire
            ("c", "del_proc", 90),
            ("d", "event", 25),
            ("e", "event", 20),
        )
    )
    first.process_watermark(25)  # b@10, e@20, d@25 — in timestamp order, not registration
    first.set_processing_time(99)  # nothing due yet
    first.set_processing_time(150)  # b@100
    assert fired(first) == [
        ("b", 10, "event_time"),
        ("e", 20, "event_time"),
        ("d", 25, "event_time"),
        ("b", 100, "processing_time"),
    ]
    assert [r["ts"] for r in first.output_rows()] == [10, 20, 25, 100]  # ctx.timestamp()
    snapshot = first.checkpoint(1)

    timers_file = snapshot.operator("timers").timers  # type: ignore[union-attr]
    assert timers_file is not None
    table = pa.ipc.open_file(timers_file).read_all()
    assert list(
        zip(
            *(table.column(c).to_pylist() for c in ("key", "timestamp", "time_domain")), strict=True
        )
    ) == [
        ("a", 30, "event_time"),
        ("a", 200, "processing_time"),
    ]

    restored = OneInputHarness(operator(), restore_from=snapshot)
    restored.process_records(records(("f", "proc", 180)))
    restored.set_processing_time(250)  # f@180, then the restored a@200
    restored.process_watermark(40)  # the restored a@30
    assert fired(restored) == [
        ("f", 180, "processing_time"),
        ("a", 200, "processing_time"),
        ("a", 30, "event_time"),
    ]


def test_timers_registered_while_firing_fire_in_the_same_pass_and_reach_side_outputs() -> None:
    harness = OneInputHarness(operator())
    harness.process_records(records(("rearm", "event", 5), ("rearm", "proc", 7)))
    harness.process_watermark(6)  # 5 fires, registers 6, which fires in the same pass
    harness.set_processing_time(8)  # 7, then 8
    assert fired(harness) == [
        ("rearm", 5, "event_time"),
        ("rearm", 6, "event_time"),
        ("rearm", 7, "processing_time"),
        ("rearm", 8, "processing_time"),
    ]
    assert harness.side_output_rows(REARMED) == [
        {"key": "rearm", "at": 6},
        {"key": "rearm", "at": 7},
        {"key": "rearm", "at": 8},
        {"key": "rearm", "at": 9},
    ]
    service = harness.operators[0].timer_service()
    assert service.timers(TimeDomain.EVENT_TIME) == [(7, "rearm")]
    assert service.timers(TimeDomain.PROCESSING_TIME) == [(9, "rearm")]


def test_end_of_input_fires_event_timers_but_never_future_processing_timers() -> None:
    harness = OneInputHarness(operator())
    harness.process_records(records(("a", "event", 50), ("a", "proc", 10)))
    harness.end_input()  # MAX_WATERMARK fires a@50; a@10 is in the future at finish (now 0)
    harness.set_processing_time(100)  # too late: the operator finished
    harness.complete()
    assert fired(harness) == [("a", 50, "event_time")]
    service = harness.operators[0].timer_service()
    assert service.pending(TimeDomain.PROCESSING_TIME) == 1  # still in the final snapshot


class Logged(KeyedProcessFunction):
    """A processing-time timer at each row's ``at``; each firing is noted in ``log`` (the
    recorder's sequence) and emits ``at + 1`` and ``at + 1000``; finish registers a timer
    at 0, already due."""

    output_schema = pa.schema([("key", pa.string()), ("at", pa.int64())])

    def __init__(self, name: str) -> None:
        self.name = name
        self.log: list[tuple[Any, ...]] = []

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.ctx = ctx
        ctx.timer_service().register_processing_time_timer(value["at"])

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        self.log.append(("on_timer", self.name, timestamp, ctx.get_current_key()))
        out.collect({"key": ctx.get_current_key(), "at": timestamp + 1})
        out.collect({"key": ctx.get_current_key(), "at": timestamp + 1000})

    def finish(self) -> None:
        self.ctx.timer_service().register_processing_time_timer(0)


def logged(*names: str, recorder: LifecycleRecorder) -> OneInputHarness:
    """A harness of Logged operators, chained; their firings go into the recorder's sequence."""
    operators = [KeyedProcessOperator(Logged(n), key_column="key", name=n) for n in names]
    harness = OneInputHarness(*operators, plugins=[recorder])
    for op in operators:
        op.function.log = recorder.by_task[harness.info.key]  # type: ignore[attr-defined]
    return harness


def finish_phase(recorder: LifecycleRecorder) -> list[tuple[Any, ...]]:
    calls = recorder.calls(exclude={"state"})
    return calls[calls.index(("task", "run")) : calls.index(("task", "snapshot"))]


def test_due_processing_timers_fire_before_finish_and_future_ones_never(
    recorder: LifecycleRecorder,
) -> None:
    harness = logged("t", recorder=recorder)
    harness.process_records([{"key": "b", "at": 10}, {"key": "a", "at": 5}, {"key": "a", "at": 50}])
    harness.process_watermark(MAX)
    harness.clock.set(10)  # time passes after the last check: b@10 and a@5 are due now
    harness.end_input(max_watermark=False)
    snapshot = harness.complete()
    assert finish_phase(recorder) == [
        ("task", "run"),
        ("operator_process_batch", "t"),
        ("operator_process_watermark", "t", MAX),
        ("operator_end_input", "t", 1),
        ("task", "finish"),
        ("on_timer", "t", 5, "a"),  # due: oldest first, before finish
        ("on_timer", "t", 10, "b"),
        ("operator_finish", "t"),
        ("function_finish", "t"),  # registers a timer at 0: accepted, never fires
    ]
    assert harness.output_rows() == [
        {"key": "a", "at": 6},
        {"key": "a", "at": 1005},
        {"key": "b", "at": 11},
        {"key": "b", "at": 1010},
    ]
    service = harness.operators[0].timer_service()
    assert service.timers(TimeDomain.PROCESSING_TIME) == [(0, "b"), (50, "a")]  # 0: in finish
    table = pa.ipc.open_file(snapshot.operator("t").timers).read_all()  # type: ignore[union-attr,arg-type]
    assert sorted(table.column("timestamp").to_pylist()) == [0, 50]  # in the final snapshot


def test_each_chained_operator_fires_its_due_timers_before_its_end_input_and_finish(
    recorder: LifecycleRecorder,
) -> None:
    harness = logged("first", "second", recorder=recorder)
    harness.process_records([{"key": "a", "at": 5}, {"key": "a", "at": 50}])
    harness.process_watermark(MAX)
    harness.clock.set(10)
    harness.end_input(max_watermark=False)
    harness.complete()
    assert finish_phase(recorder) == [
        ("task", "run"),
        ("operator_process_batch", "first"),
        ("operator_process_watermark", "first", MAX),
        ("operator_process_watermark", "second", MAX),
        ("operator_end_input", "first", 1),
        ("task", "finish"),
        ("on_timer", "first", 5, "a"),  # the head's due timer; a@50 never fires
        ("operator_process_batch", "second"),  # its output flows on: second registers 6, 1005
        ("operator_finish", "first"),
        ("function_finish", "first"),
        ("on_timer", "second", 6, "a"),  # due now (10), before second's end_input
        ("operator_end_input", "second", 1),
        ("operator_finish", "second"),
        ("function_finish", "second"),
    ]
    assert harness.output_rows() == [{"key": "a", "at": 7}, {"key": "a", "at": 1006}]
    first, second = (op.timer_service() for op in harness.operators)  # type: ignore[attr-defined]
    assert first.timers(TimeDomain.PROCESSING_TIME) == [(0, "a"), (50, "a")]
    assert second.timers(TimeDomain.PROCESSING_TIME) == [(0, "a"), (1005, "a")]


def test_timers_registered_during_finish_never_fire_in_either_domain() -> None:
    class LateTimers(KeyedProcessFunction):
        def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            self.ctx = ctx

        def finish(self) -> None:
            self.ctx.timer_service().register_event_time_timer(0)
            self.ctx.timer_service().register_processing_time_timer(0)

        def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
            out.collect({"fired": timestamp})

    late = KeyedProcessOperator(LateTimers(), key_column="key", name="late")
    harness = OneInputHarness(late)
    harness.process_records([{"key": "x"}])
    snapshot = harness.complete()
    assert harness.output_rows() == []
    assert late.timer_service().pending() == 2  # accepted, in the final snapshot
    table = pa.ipc.open_file(snapshot.operator("late").timers).read_all()  # type: ignore[union-attr,arg-type]
    assert sorted(table.column("time_domain").to_pylist()) == ["event_time", "processing_time"]


def test_processing_time_follows_the_harness_clock() -> None:
    class Now(KeyedProcessFunction):
        def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            out.collect({"now": ctx.timer_service().current_processing_time()})

    harness = OneInputHarness(KeyedProcessOperator(Now(), key_column="key"))
    harness.process_records([{"key": "x"}])
    harness.set_processing_time(42)
    harness.process_records([{"key": "x"}])
    assert harness.output_rows() == [{"now": 0}, {"now": 42}]
    with pytest.raises(Exception, match="cannot go back"):
        harness.set_processing_time(41)


def test_a_timer_timestamp_must_be_an_int() -> None:
    class Bad(KeyedProcessFunction):
        def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            ctx.timer_service().register_processing_time_timer(1.5)

    harness = OneInputHarness(KeyedProcessOperator(Bad(), key_column="key", name="bad"))
    with pytest.raises(Exception) as caught:
        harness.process_records([{"key": "x"}])
    assert "a timer's timestamp is an int" in str(caught.value.__cause__)


def test_keyed_co_process_timers_of_both_domains() -> None:
    from flintlock import CoProcessFunction
    from flintlock.operators.process import CoProcessOperator

    class Both(CoProcessFunction):
        def process_element1(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            ctx.timer_service().register_event_time_timer(value["at"])

        def process_element2(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
            ctx.timer_service().register_processing_time_timer(value["at"])

        def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
            out.collect(
                {"key": ctx.get_current_key(), "at": timestamp, "by": ctx.time_domain().value}
            )

    harness = TwoInputHarness(CoProcessOperator(Both(), key_columns=("key", "key"), name="co"))
    harness.process_records([{"key": "a", "at": 7}], input_index=1)
    harness.process_records([{"key": "b", "at": 3}], input_index=2)
    harness.process_watermark(10, input_index=1)  # input 2 holds event time back
    harness.set_processing_time(3)
    harness.process_watermark(10, input_index=2)
    assert harness.output_rows() == [
        {"key": "b", "at": 3, "by": "processing_time"},
        {"key": "a", "at": 7, "by": "event_time"},
    ]


def test_due_processing_timers_are_mails_queued_behind_the_mails_already_waiting(
    recorder: LifecycleRecorder,
) -> None:
    """Flink's timers are mails: a timer that comes due waits for the mails put before."""
    harness = logged("t", recorder=recorder)
    harness.process_records([{"key": "a", "at": 5}])
    log = recorder.by_task[harness.info.key]
    operator = harness.operators[0]
    operator.mailbox.execute(lambda: log.append(("mail", "put before")), "before")
    harness.set_processing_time(10)  # the timer comes due: its mail queues behind
    harness.process_records([{"key": "b", "at": 20}])
    harness.set_processing_time(30)
    calls = recorder.calls(exclude={"state"})
    assert [c for c in calls if c[0] in ("mail", "on_timer")] == [
        ("mail", "put before"),
        ("on_timer", "t", 5, "a"),
        ("on_timer", "t", 20, "b"),
    ]
    assert harness.output_rows() == [
        {"key": "a", "at": 6},
        {"key": "a", "at": 1005},
        {"key": "b", "at": 21},
        {"key": "b", "at": 1020},
    ]
