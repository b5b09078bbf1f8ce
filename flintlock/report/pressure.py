"""How long each vertex was held back by its downstream in an epoch: Flink's
``backPressuredTimeMsPerSecond``, as it shows on Spark's staged shuffles.

A Flink task is backpressured while its output buffers are full: it may not produce until
a slower task downstream takes its data. On Spark a vertex's subtasks hand their whole
epoch to a shuffle and end; the job may not start its next epoch (and so the vertex may not
read on) until every vertex downstream has processed the epoch too. The time from a
subtask's end to the last end of a subtask downstream (of any vertex its output reaches)
is that wait: a slow vertex backpressures every vertex upstream of it, as in Flink.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def downstream_of(edges: Iterable[tuple[int, int]]) -> dict[int, set[int]]:
    """Each vertex id -> every vertex its output reaches (through any number of edges)."""
    direct: dict[int, set[int]] = {}
    for source, target in edges:
        direct.setdefault(source, set()).add(target)
    reach: dict[int, set[int]] = {}
    for start in direct:
        seen: set[int] = set()
        todo = list(direct[start])
        while todo:
            vertex = todo.pop()
            if vertex not in seen:
                seen.add(vertex)
                todo.extend(direct.get(vertex, ()))
        reach[start] = seen
    return reach


def subtask_ends(entry: dict[str, Any]) -> dict[str, list[float]]:
    """Each vertex name -> when each of its subtasks ended its epoch (wall-clock seconds:
    the end of its last lifecycle phase); subtasks that recorded no phase are left out."""
    ends: dict[str, list[float]] = {}
    for subtask in entry.get("subtasks", []):
        phases = subtask.get("lifecycle_phases") or {}
        if phases:
            ends.setdefault(subtask["task_name"], []).append(max(e for _, e in phases.values()))
    return ends


def backpressured_ms_per_second(
    entry: dict[str, Any], vertices: dict[int, str], edges: Iterable[tuple[int, int]]
) -> dict[str, float]:
    """Vertex name -> the mean over its subtasks of the time each waited for the vertices
    downstream to finish the epoch, in ms per second of the epoch's ``figures.seconds``
    (at most 1000); vertices with nothing downstream (sinks) wait for nothing: 0."""
    seconds = float((entry.get("figures") or {}).get("seconds") or 0.0)
    ends = subtask_ends(entry)
    if seconds <= 0 or not ends:
        return {}
    reach = downstream_of(edges)
    found: dict[str, float] = {}
    for vertex_id, name in vertices.items():
        mine = ends.get(name)
        if not mine:
            continue
        later = [end for other in reach.get(vertex_id, ()) for end in ends.get(vertices[other], [])]
        last = max(later, default=None)
        waited = [max(0.0, last - end) for end in mine] if last is not None else [0.0]
        found[name] = min(1000.0, 1000.0 * sum(waited) / len(waited) / seconds)
    return found
