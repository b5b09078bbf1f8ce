"""User metrics with Flink's names and shapes: ``runtime_context.metric_group()`` gives
counters, gauges, histograms and meters, read once at the end of each epoch.

Flink's names, so a Flink user's metric code reads the same. They are read once per epoch
because a subtask's figures reach the driver only in its acknowledgement (``subtask.py``):
gauges are called and histograms' statistics computed then, not as values come in."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from flintlock.core.errors import MetricError

PERCENTILES = (50, 75, 95, 98, 99, 99.9)
"""The quantiles a histogram reports, as Flink's ``HistogramStatistics`` offers them."""


class Counter:
    """A count that goes up (``inc``) and down (``dec``), as Flink's ``Counter``."""

    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        """Add ``n`` (per batch: ``inc(len(batch))``, not once per record)."""
        self.count += n

    def dec(self, n: int = 1) -> None:
        """Subtract ``n``."""
        self.count -= n

    def get_count(self) -> int:
        """The current count."""
        return self.count


class Gauge:
    """A value read by calling ``fn`` when the epoch's metrics are taken (snapshot time)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def get_value(self) -> Any:
        """Call the gauge's function now."""
        return self.fn()


class Meter:
    """Events and their rate per second over the epoch, as Flink's ``Meter``."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.started = clock()
        self.count = 0

    def mark_event(self, n: int = 1) -> None:
        """Count ``n`` events."""
        self.count += n

    def get_count(self) -> int:
        """Events marked so far."""
        return self.count

    def get_rate(self) -> float:
        """Events per second since the meter was made (the epoch's start for the task)."""
        seconds = self.clock() - self.started
        return self.count / seconds if seconds > 0 else 0.0


class Histogram:
    """A distribution of values; its statistics are computed once, at the epoch's end.

    Keeps the last ``window_size`` values, as Flink's ``DescriptiveStatisticsHistogram``."""

    def __init__(self, window_size: int = 10_000) -> None:
        self.window_size = window_size
        self.values: list[float] = []
        self.count = 0

    def update(self, value: float) -> None:
        """Add one value."""
        self.count += 1
        self.values.append(value)
        if len(self.values) > 2 * self.window_size:
            del self.values[: -self.window_size]

    def get_count(self) -> int:
        """Values seen so far (all of them, not only the window)."""
        return self.count

    def get_statistics(self) -> dict[str, Any]:
        """count, min, max, mean, stddev and the percentiles ``p50`` ... ``p99.9``."""
        window = np.asarray(self.values[-self.window_size :], dtype="float64")
        statistics: dict[str, Any] = {"count": self.count}
        if window.size == 0:
            return statistics
        statistics.update(
            min=float(window.min()),
            max=float(window.max()),
            mean=float(window.mean()),
            stddev=float(window.std()),
        )
        for q, value in zip(PERCENTILES, np.percentile(window, PERCENTILES), strict=True):
            statistics[f"p{q:g}"] = float(value)
        return statistics


Metric = Counter | Gauge | Meter | Histogram
MetricT = TypeVar("MetricT", Counter, Gauge, Meter, Histogram)
KINDS: dict[type, str] = {
    Counter: "counters",
    Gauge: "gauges",
    Meter: "meters",
    Histogram: "histograms",
}


class MetricGroup:
    """The metrics of one operator in one subtask, Flink's ``MetricGroup``: names are
    unique in the operator; ``add_group`` prefixes them (``group.name``)."""

    def __init__(self, prefix: str = "", metrics: dict[str, Metric] | None = None) -> None:
        self.prefix = prefix
        self.metrics: dict[str, Metric] = {} if metrics is None else metrics

    def counter(self, name: str) -> Counter:
        """The counter ``name`` (the same one if asked again)."""
        return self._register(name, Counter, Counter)

    def gauge(self, name: str, fn: Callable[[], Any]) -> Gauge:
        """A gauge ``name`` whose value is ``fn()`` at the end of each epoch."""
        return self._register(name, Gauge, lambda: Gauge(fn))

    def meter(self, name: str) -> Meter:
        """The meter ``name``: events and events per second."""
        return self._register(name, Meter, Meter)

    def histogram(self, name: str, window_size: int = 10_000) -> Histogram:
        """The histogram ``name`` over the last ``window_size`` values."""
        return self._register(name, Histogram, lambda: Histogram(window_size))

    def add_group(self, name: str) -> MetricGroup:
        """A sub-group whose metrics are named ``<name>.<metric>``."""
        return MetricGroup(f"{self.prefix}{self._check(name)}.", self.metrics)

    def values(self) -> dict[str, dict[str, Any]]:
        """Every metric's value now, by kind then name: counters and gauges as values,
        meters as ``{count, rate}``, histograms as their statistics. Empty kinds left out."""
        document: dict[str, dict[str, Any]] = {}
        for name, metric in sorted(self.metrics.items()):
            if isinstance(metric, Counter):
                value: Any = metric.count
            elif isinstance(metric, Gauge):
                value = plain(metric.get_value())
            elif isinstance(metric, Meter):
                value = {"count": metric.count, "rate": metric.get_rate()}
            else:
                value = metric.get_statistics()
            document.setdefault(KINDS[type(metric)], {})[name] = value
        return document

    def _register(self, name: str, kind: type[MetricT], make: Callable[[], MetricT]) -> MetricT:
        full = self.prefix + self._check(name)
        found = self.metrics.get(full)
        if found is None:
            made = make()
            self.metrics[full] = made
            return made
        if isinstance(found, kind) and type(found) is kind:
            return found
        raise MetricError(
            f"metric {full!r} is a {type(found).__name__}, asked for as a {kind.__name__}"
        )

    @staticmethod
    def _check(name: str) -> str:
        if not isinstance(name, str) or not name:
            raise MetricError(f"a metric name must be a non-empty string, got {name!r}")
        return name


def plain(value: Any) -> Any:
    """A gauge's value as JSON can hold it: numbers, text, booleans and None as they are,
    numpy scalars as numbers, anything else as its ``str``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
