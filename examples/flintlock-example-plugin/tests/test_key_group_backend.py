"""The example plugin's state backend: found by name, keeps state across a restore."""

from __future__ import annotations

import pyarrow as pa
from flintlock_example_plugin import STATE_BACKEND, KeyGroupStateBackend

from flintlock import KeyedProcessFunction, ValueStateDescriptor
from flintlock.operators.process import KeyedProcessOperator
from flintlock.plugin_api import build_plugin_manager, build_registry
from flintlock.testing import OneInputHarness


class Count(KeyedProcessFunction):
    def open(self) -> None:
        descriptor = ValueStateDescriptor("n", pa.int64(), default=0)
        self.n = self.runtime_context.get_state(descriptor)

    def process_element(self, value, ctx, out):  # type: ignore[no-untyped-def]
        self.n.update(self.n.value() + 1)
        out.collect({"k": value["k"], "n": self.n.value()})


def counting() -> KeyedProcessOperator:
    return KeyedProcessOperator(Count(), key_column="k", name="count")


def test_flintlock_finds_the_backend_by_name() -> None:
    registry = build_registry(build_plugin_manager())
    assert registry.get("state backend", STATE_BACKEND) is KeyGroupStateBackend


def test_counts_survive_a_restore_in_dicts_per_key_group() -> None:
    first = OneInputHarness(counting(), state_backend=STATE_BACKEND)
    first.process_records([{"k": "a"}, {"k": "b"}, {"k": "a"}])
    keyed = first.operators[0].context.keyed_backend
    groups = keyed._tables["n"].groups  # type: ignore[union-attr]
    assert sum(len(entries) for entries in groups.values()) == 2
    second = OneInputHarness(
        counting(), state_backend=STATE_BACKEND, restore_from=first.checkpoint(1)
    )
    second.process_records([{"k": "a"}, {"k": "c"}])
    second.complete(2)
    assert second.output_rows() == [{"k": "a", "n": 3}, {"k": "c", "n": 1}]
