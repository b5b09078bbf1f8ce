"""The sequence source's enumerator and reader, without Spark: what each epoch reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flintlock.core.sources.sequence import SequenceSource
from flintlock.errors import GraphError


def read_all(source: SequenceSource, assignments: list[list]) -> list[tuple[int, int]]:
    rows = []
    for subtask, splits in enumerate(assignments):
        reader = source.create_epoch_reader(subtask, len(assignments), splits)
        table = pa.Table.from_batches(list(reader.read()), schema=source.schema)
        rows += list(zip(table["id"].to_pylist(), table["event_time"].to_pylist(), strict=True))
    return rows


def test_epochs_read_consecutive_ranges_split_over_subtasks() -> None:
    source = SequenceSource(end=1000, rows_per_epoch=300, batch_size=64)
    state = source.initial_state(now_ms=0)
    seen, exhausted = [], []
    for _ in range(4):
        planned = source.plan_epoch(state, now_ms=0, parallelism=3)
        assert len(planned.assignments) == 3
        seen += [row_id for row_id, _ in read_all(source, planned.assignments)]
        exhausted.append(planned.exhausted)
        state = planned.state
    assert seen == list(range(1000))  # each id once, in order of the splits
    assert exhausted == [False, False, False, True]
    assert state["next"] == 1000


def test_a_rate_makes_rows_available_over_time_with_their_event_time() -> None:
    source = SequenceSource(rows_per_second=100)
    state = source.initial_state(now_ms=5_000)
    planned = source.plan_epoch(state, now_ms=7_500, parallelism=2)  # 2.5 s: 250 rows
    rows = read_all(source, planned.assignments)
    assert [r for r, _ in rows] == list(range(250))
    assert [t for _, t in rows] == [5_000 + 10 * r for r in range(250)]
    again = source.plan_epoch(planned.state, now_ms=7_500, parallelism=2)
    assert read_all(source, again.assignments) == []  # nothing new at the same time
    assert not again.exhausted


def test_planning_is_deterministic_in_its_state() -> None:
    source = SequenceSource(rows_per_second=1000, end=10_000)
    state = source.initial_state(now_ms=0)
    first = source.plan_epoch(state, now_ms=1234, parallelism=4)
    replay = source.plan_epoch(state, now_ms=1234, parallelism=4)
    assert first == replay
    assert read_all(source, first.assignments) == read_all(source, replay.assignments)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs rows_per_epoch"),
        ({"rows_per_second": 0}, "rows_per_second must be > 0"),
        ({"end": 5, "start": 10}, "before start"),
        ({"end": 5, "rows_per_epoch": 0}, "rows_per_epoch must be >= 1"),
    ],
)
def test_bad_settings_are_refused(options: dict, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        SequenceSource(**options)


def test_an_unbounded_source_has_no_bounded_reader() -> None:
    with pytest.raises(TypeError, match="is unbounded"):
        SequenceSource(end=10).create_reader(0, 1, {})
