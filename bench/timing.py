"""Timing shared by the benchmarks: medians of interleaved runs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(runs: int, variants: dict[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """Median seconds over ``runs`` and the last result, per variant.

    Runs are interleaved (round robin over the variants), so that a slow phase of the
    machine falls on every variant alike rather than on the one that ran then."""
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    results: dict[str, Any] = {}
    for _ in range(runs):
        for name, work in variants.items():
            started = time.perf_counter()
            results[name] = work()
            seconds[name].append(time.perf_counter() - started)
    return {name: (statistics.median(seconds[name]), results[name]) for name in variants}
