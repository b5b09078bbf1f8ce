"""The broadcast state pattern: every subtask sees every rule, the events read them
read-only; the state survives restore and rescale (each new subtask takes one copy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import (
    BroadcastProcessFunction,
    GraphError,
    KeyedBroadcastProcessFunction,
    LifecycleError,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
)
from flintlock.core.api.keys import ColumnKey
from flintlock.core.exchange.key_groups import key_group_of, subtask_for_key_group
from flintlock.core.state import MapStateDescriptor
from flintlock.operators.broadcast import BroadcastProcessOperator
from flintlock.testing import TwoInputHarness

RULES = MapStateDescriptor("thresholds", pa.string(), pa.int64())


class Alert(KeyedBroadcastProcessFunction):
    """Counts each key's events; emits when a rule's threshold for the kind is reached."""

    def open(self) -> None:
        self.seen = self.runtime_context.get_state(ValueStateDescriptor("seen", default=0))

    def process_element(self, value: Any, ctx: Any, out: Any) -> None:
        self.seen.update(self.seen.value() + 1)
        threshold = ctx.get_broadcast_state(RULES).get(value["kind"])
        if threshold is not None and self.seen.value() >= threshold:
            out.collect(
                {"user": ctx.get_current_key(), "kind": value["kind"], "n": self.seen.value()}
            )

    def process_broadcast_element(self, value: Any, ctx: Any, out: Any) -> None:
        ctx.get_broadcast_state(RULES).put(value["kind"], value["threshold"])


class WritesFromEvents(BroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any, out: Any) -> None:
        ctx.get_broadcast_state(RULES).put("x", 1)

    def process_broadcast_element(self, value: Any, ctx: Any, out: Any) -> None:
        pass


def owner(user: str) -> int:
    """The subtask of 3 that owns ``user``'s key group."""
    return subtask_for_key_group(key_group_of(user, 128), 3, 128)


def alert_operator() -> BroadcastProcessOperator:
    return BroadcastProcessOperator(Alert(), ("thresholds",), ColumnKey("user"), name="alerts")


def test_rules_from_the_broadcast_side_apply_to_events() -> None:
    harness = TwoInputHarness(alert_operator())
    harness.process_records([{"kind": "login", "threshold": 2}], input_index=2)
    harness.process_records(
        [
            {"user": "ada", "kind": "login"},
            {"user": "bob", "kind": "login"},
            {"user": "ada", "kind": "login"},
        ]
    )
    assert harness.output_rows() == [{"user": "ada", "kind": "login", "n": 2}]


def test_the_event_side_cannot_write_the_broadcast_state() -> None:
    operator = BroadcastProcessOperator(WritesFromEvents(), ("thresholds",), None, name="w")
    harness = TwoInputHarness(operator)
    with pytest.raises(LifecycleError, match="the broadcast state is read-only in process_element"):
        harness.process_records([{"user": "ada"}])
        harness.end_input(1)
        harness.end_input(2)


def test_broadcast_state_is_restored_by_every_new_subtask() -> None:
    first = TwoInputHarness(alert_operator())
    first.process_records([{"kind": "login", "threshold": 1}], input_index=2)
    snapshot = first.checkpoint(1)
    for subtask in range(3):  # rescale 1 -> 3: each takes the one old copy
        operator = alert_operator()
        restored = TwoInputHarness(
            operator, restore_from=snapshot, parallelism=3, subtask_index=subtask
        ).open()
        assert dict(operator.broadcast_state(RULES).items()) == {"login": 1}
        user = next(u for u in (f"u{i}" for i in range(100)) if owner(u) == subtask)
        restored.process_records([{"user": user, "kind": "login"}])
        assert restored.output_rows() == [{"user": user, "kind": "login", "n": 1}]


def test_the_function_must_fit_the_stream() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    rules = env.from_collection([{"kind": "a", "threshold": 1}]).broadcast(RULES)
    events = env.from_collection([{"user": "ada", "kind": "a"}])
    with pytest.raises(GraphError, match="non-keyed stream connected with a broadcast stream"):
        events.connect(rules).process(Alert())
    with pytest.raises(GraphError, match="takes state descriptors"):
        events.broadcast("thresholds")  # type: ignore[arg-type]


class EchoRules(BroadcastProcessFunction):
    """Emits each broadcast row with the subtask that saw it, and passes events on."""

    def process_element(self, value: Any, ctx: Any, out: Any) -> None:
        out.collect({"what": "event", "item": value["user"], "subtask": -1})

    def process_broadcast_element(self, value: Any, ctx: Any, out: Any) -> None:
        subtask = self.runtime_context.task_info.subtask_index
        ctx.get_broadcast_state(RULES).put(value["kind"], value["threshold"])
        out.collect({"what": "rule", "item": value["kind"], "subtask": subtask})


@pytest.mark.slow
def test_every_subtask_sees_every_broadcast_row_on_spark(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    kinds = [f"k{i}" for i in range(5)]
    rules = env.from_collection([{"kind": k, "threshold": 1} for k in kinds]).broadcast(RULES)
    events = env.from_collection([{"user": f"u{i}"} for i in range(30)], batch_size=4)
    table = events.connect(rules).process(EchoRules(), name="echo").execute_and_collect("broadcast")
    rows = table.to_pylist()
    seen = sorted((r["subtask"], r["item"]) for r in rows if r["what"] == "rule")
    assert seen == sorted((s, k) for s in (0, 1) for k in kinds)  # every rule, every subtask
    assert sorted(r["item"] for r in rows if r["what"] == "event") == sorted(
        f"u{i}" for i in range(30)
    )  # events are not broadcast: each once
