"""The per-record window operator's batch grouping (rows grouped by key and window per
batch, a timer per window) gives exactly the row-by-row path's output: same rows in the
same order, same late rows, across out-of-order and late rows, allowed lateness, sliding
windows, several batches and a checkpoint restored into a fresh operator."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from flintlock import (
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from flintlock.core.api.keys import ColumnKey
from flintlock.core.api.side_outputs import OutputTag
from flintlock.core.api.window_functions import AggregateContents, ListContents
from flintlock.core.state.aggregate import AggregateFunction
from flintlock.operators.window_groups import window_shape
from flintlock.operators.windows import WindowOperator
from flintlock.testing import OneInputHarness

LATE = OutputTag("late")


class SumV(AggregateFunction):
    """The sum of ``v`` and the order rows came in (so add order is checked too)."""

    def create_accumulator(self) -> list[int]:
        return [0]

    def add(self, value: dict[str, Any], acc: list[int]) -> list[int]:
        return [acc[0] + value["v"], *acc[1:], value["v"]]

    def get_result(self, acc: list[int]) -> tuple[int, tuple[int, ...]]:
        return acc[0], tuple(acc[1:])

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], *a[1:], *b[1:]]


class Label(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: list[Any], out: Any) -> None:
        for element in elements:
            total, seen = element if isinstance(element, tuple) else (element["v"], ())
            out.collect({"k": key, "start": context.window.start, "sum": total, "seen": str(seen)})


def operator(assigner: Any, lateness: int, grouped: bool, listing: bool) -> WindowOperator:
    contents = ListContents(Label()) if listing else AggregateContents(SumV(), Label())
    op = WindowOperator(
        assigner, contents, ColumnKey("k"), "t", allowed_lateness=lateness, late_tag=LATE
    )
    if not grouped:
        op._shape = None  # the row-by-row path
    return op


def batches(seed: int) -> list[pa.RecordBatch]:
    """Eight batches of out-of-order rows over 5 keys; some far behind the watermark."""
    rng = random.Random(seed)
    out, clock = [], 0
    for _ in range(8):
        clock += rng.randint(20, 60)
        rows = [
            {"k": f"k{rng.randint(0, 4)}", "t": clock - rng.choice([0, 3, 9, 25, 70, 150]), "v": i}
            for i in range(rng.randint(1, 40))
        ]
        out.append(pa.RecordBatch.from_pylist(rows))
    return out


def run(assigner: Any, lateness: int, grouped: bool, listing: bool, seed: int) -> Any:
    """Four batches, a checkpoint restored into a new operator, four more; every output."""
    data = batches(seed)
    ops = [operator(assigner, lateness, grouped, listing) for _ in range(2)]
    first = OneInputHarness(ops[0])
    for batch in data[:4]:
        first.process_batch(batch)
        first.process_watermark(max(batch.column("t").to_pylist()) - 10)
    snapshot = first.checkpoint(1)
    second = OneInputHarness(ops[1], restore_from=snapshot)
    for batch in data[4:]:
        second.process_batch(batch)
        second.process_watermark(max(batch.column("t").to_pylist()) - 10)
    second.end_input()
    grouped_batches = ops[0].batches_grouped + ops[1].batches_grouped
    assert (grouped_batches > 0) == grouped, "the grouped path ran (or was turned off)"
    return (
        first.output_rows(),
        first.side_output_rows(LATE),
        second.output_rows(),
        second.side_output_rows(LATE),
    )


ASSIGNERS = [TumblingEventTimeWindows.of(20), SlidingEventTimeWindows.of(30, 10)]


@pytest.mark.parametrize("assigner", ASSIGNERS, ids=["tumbling", "sliding"])
@pytest.mark.parametrize("lateness", [0, 15])
@pytest.mark.parametrize("listing", [False, True], ids=["aggregate", "process"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_grouped_batches_match_the_row_by_row_path(
    assigner: Any, lateness: int, listing: bool, seed: int
) -> None:
    grouped = run(assigner, lateness, True, listing, seed)
    assert grouped == run(assigner, lateness, False, listing, seed)
    assert grouped[0] and grouped[2], "windows fired before and after the restore"
    assert grouped[1] or grouped[3], "some rows were late"


def test_only_fixed_size_event_time_windows_group_batches() -> None:
    assert window_shape(TumblingEventTimeWindows.of(20, 5)) == (20, 20, 5)
    assert window_shape(SlidingEventTimeWindows.of(30, 10)) == (30, 10, 0)
    assert window_shape(SlidingEventTimeWindows.of(30, 20)) is None  # 30 % 20: row path
