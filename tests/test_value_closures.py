"""Value state's per-record closures (``core/state/value_closures.py``) behave as the
methods they stand for: ints checked inline, None clears, anything else checked fully."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from flintlock import KeyedProcessFunction, ValueStateDescriptor
from flintlock.errors import StateTypeError
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import OneInputHarness


class Store(KeyedProcessFunction):
    """Stores ``v`` (an int8 state) and emits what value() gave before and after."""

    def open(self) -> None:
        self.state = self.runtime_context.get_state(
            ValueStateDescriptor("small", pa.int8(), default=-1)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        before = self.state.value()
        self.state.update(None if value["v"] == 1000 else value["v"])
        out.collect({"k": value["k"], "before": before, "after": self.state.value()})


def run(values: list[int]) -> list[tuple[int, int]]:
    harness = OneInputHarness(KeyedProcessOperator(Store(), key_column="k"))
    harness.process_batch(pa.record_batch({"k": [1] * len(values), "v": values}))
    harness.complete()
    return [(r["before"], r["after"]) for r in harness.output().to_pylist()]


def test_the_handle_calls_are_the_closures() -> None:
    harness = OneInputHarness(KeyedProcessOperator(Store(), key_column="k"))
    harness.process_batch(pa.record_batch({"k": [1], "v": [2]}))
    state = harness.operators[0].function.state  # type: ignore[attr-defined]
    assert state.update.__qualname__ == "update_closure.<locals>.update"
    assert state.value.__qualname__ == "value_closure.<locals>.value"


def test_ints_in_range_are_stored_and_none_clears_back_to_the_default() -> None:
    assert run([5, -128, 127, 1000, 7]) == [(-1, 5), (5, -128), (-128, 127), (127, -1), (-1, 7)]


@pytest.mark.parametrize("bad", [128, -129])
def test_an_int_out_of_the_declared_range_is_refused_where_it_is_written(bad: int) -> None:
    with pytest.raises(Exception) as caught:
        run([3, bad])
    assert isinstance(caught.value.__cause__, StateTypeError)
    assert f"cannot hold {bad}" in str(caught.value.__cause__)
