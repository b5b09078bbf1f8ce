"""A vertex's backpressured ms per second in an epoch, from its subtasks' lifecycle phases
(``flintlock/report/pressure.py``): the wait for every vertex downstream to end the epoch."""

from __future__ import annotations

from typing import Any

import pytest

from flintlock.report.pressure import backpressured_ms_per_second, downstream_of


def subtask(name: str, index: int, start: float, end: float) -> dict[str, Any]:
    """A run log subtask that ran from ``start`` to ``end`` (open, then run)."""
    middle = (start + end) / 2
    phases = {"open": [start, middle], "run": [middle, end]}
    return {"task_name": name, "subtask_index": index, "lifecycle_phases": phases}


def entry(seconds: float, *subtasks: dict[str, Any]) -> dict[str, Any]:
    return {"checkpoint_id": 1, "figures": {"seconds": seconds}, "subtasks": list(subtasks)}


def test_downstream_is_every_vertex_the_output_reaches() -> None:
    assert downstream_of([(1, 2), (2, 3), (1, 4)]) == {1: {2, 3, 4}, 2: {3}}


def test_a_slow_sink_backpressures_each_vertex_upstream_of_it() -> None:
    """source (1) -> map (2) -> slow sink (3): the source's subtasks end at 1.0 and 1.5 s,
    the map's at 2.0, the sink's last at 4.0, in a 4-second epoch."""
    vertices = {1: "source", 2: "map", 3: "sink"}
    epoch = entry(
        4.0,
        subtask("source", 0, 0.0, 1.0),
        subtask("source", 1, 0.0, 1.5),
        subtask("map", 0, 1.5, 2.0),
        subtask("sink", 0, 2.0, 3.0),
        subtask("sink", 1, 2.0, 4.0),
    )
    pressure = backpressured_ms_per_second(epoch, vertices, [(1, 2), (2, 3)])
    assert pressure["source"] == pytest.approx(1000 * (3.0 + 2.5) / 2 / 4.0)
    assert pressure["map"] == pytest.approx(1000 * 2.0 / 4.0)
    assert pressure["sink"] == 0.0  # nothing downstream holds it


def test_a_vertex_ending_after_its_downstream_waits_for_nothing() -> None:
    """Two branches: the slow one (2) holds its upstream, the fast one (3) does not."""
    vertices = {1: "source", 2: "slow", 3: "fast"}
    epoch = entry(2.0, subtask("source", 0, 0.0, 0.5), subtask("slow", 0, 0.5, 2.0))
    epoch["subtasks"].append(subtask("fast", 0, 0.5, 0.6))
    pressure = backpressured_ms_per_second(epoch, vertices, [(1, 2), (1, 3)])
    assert pressure == pytest.approx({"source": 750.0, "slow": 0.0, "fast": 0.0})


def test_an_epoch_without_phases_or_seconds_shows_no_figure() -> None:
    vertices = {1: "source", 2: "sink"}
    assert backpressured_ms_per_second(entry(0.0, subtask("source", 0, 0, 1)), vertices, []) == {}
    bare = entry(1.0, {"task_name": "source", "subtask_index": 0})
    assert backpressured_ms_per_second(bare, vertices, [(1, 2)]) == {}
