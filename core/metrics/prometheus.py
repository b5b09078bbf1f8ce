"""The metrics in Prometheus' text format, through ``prometheus_client``: a collector over
the latest epoch and the run's totals, a file per epoch and an HTTP endpoint on demand.

Names follow Flink's Prometheus reporter: ``flintlock_task_<metric>`` with labels
job_name, task_name and subtask_index, ``flintlock_operator_<metric>`` adds operator_name;
user metrics are ``flintlock_operator_user_<name>`` (non-alphanumerics made ``_``).
Records in and out and user meters' events are counters of the run (a counter's samples
end in ``_total``); the rest are gauges of the latest epoch, save user counters: the
run's total, but a gauge, since ``dec()`` may lower them (Flink's reporter does the same).
A watermark of MAX_WATERMARK (Long.MAX_VALUE) means the input ended."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from flintlock.core.errors import MetricsUnavailable

TASK_GAUGES = (
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "busyTimeMsPerSecond",
    "currentInputWatermark",
    "watermarkLagMs",
    "stateSizeBytes",
    "checkpointDurationMs",
    "checkpointSizeBytes",
)
"""Per subtask, the latest epoch's value."""
OPERATOR_GAUGES = (
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "currentInputWatermark",
    "watermarkLagMs",
    "stateSizeBytes",
)
"""Per operator of a subtask, the latest epoch's value."""
RECORD_COUNTS = ("numRecordsIn", "numRecordsOut")
"""Per subtask and per operator of it, counters of the run."""


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as error:
        raise MetricsUnavailable(
            "Prometheus metrics need prometheus_client: pip install 'flintlock[metrics]'"
        ) from error
    return prometheus_client


def available() -> bool:
    """True if ``prometheus_client`` can be imported."""
    try:
        _client()
    except MetricsUnavailable:
        return False
    return True


def metric_name(name: str) -> str:
    """A Prometheus-safe name: letters, digits and ``_``."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


class FlintlockCollector:
    """Yields the families of one job's latest epoch and run totals when scraped."""

    def __init__(self, job_name: str) -> None:
        self.job_name = job_name
        self.latest: dict[str, Any] | None = None
        self.totals: dict[str, Any] = {"vertices": {}}

    def update(self, latest: dict[str, Any], totals: dict[str, Any]) -> None:
        """Serve this epoch's figures from now on (one reference swap: scrapes see a
        whole epoch)."""
        self.latest, self.totals = latest, totals

    def collect(self) -> Iterator[Any]:
        """The metric families (prometheus_client's Collector protocol)."""
        core = _client().core
        kinds = {"gauge": core.GaugeMetricFamily, "counter": core.CounterMetricFamily}
        families: dict[str, Any] = {}

        def add(name: str, labels: dict[str, str], value: Any, text: str, kind: str) -> None:
            if value is None or isinstance(value, bool) or not isinstance(value, int | float):
                return
            family = families.get(name)
            if family is None:
                family = families[name] = kinds[kind](name, text, labels=list(labels))
            family.add_metric(list(labels.values()), float(value))

        self._add_totals(add)
        self._add_latest(add)
        return iter(families.values())

    def _add_totals(self, add: Any) -> None:
        """The run's counts per subtask and operator: records, user counters and meters."""
        for task, vertex in self.totals["vertices"].items():
            for index, sub in vertex["subtasks"].items():
                labels = {"job_name": self.job_name, "task_name": task, "subtask_index": index}
                for key in RECORD_COUNTS:
                    add(f"flintlock_task_{key}", labels, sub[key], f"{key}, run", "counter")
                for op, figures in sub.get("operators", {}).items():
                    op_labels = {**labels, "operator_name": op}
                    for key in RECORD_COUNTS:
                        name = f"flintlock_operator_{key}"
                        add(name, op_labels, figures.get(key), f"{key}, run", "counter")
                    user = figures.get("user", {})
                    for metric, value in user.get("counters", {}).items():
                        name = f"flintlock_operator_user_{metric_name(metric)}"
                        add(name, op_labels, value, "user counter, run", "gauge")
                    for metric, meter in user.get("meters", {}).items():
                        name = f"flintlock_operator_user_{metric_name(metric)}"
                        add(name, op_labels, meter["count"], "user meter, events", "counter")

    def _add_latest(self, add: Any) -> None:
        """The latest epoch's gauges: rates, busy time, watermarks, lag and sizes."""
        latest = self.latest
        if latest is None:
            return
        job = {"job_name": self.job_name}
        add("flintlock_job_epoch", job, latest["epoch"], "epochs run", "gauge")
        checkpoint = latest["checkpoint"]
        add("flintlock_job_lastCheckpointSize", job, checkpoint["sizeBytes"], "bytes", "gauge")
        add("flintlock_job_lastCheckpointDuration", job, checkpoint["durationMs"], "ms", "gauge")
        for task, vertex in latest["vertices"].items():
            for index, sub in vertex["subtasks"].items():
                labels = {"job_name": self.job_name, "task_name": task, "subtask_index": index}
                for key in TASK_GAUGES:
                    text = f"{key}, latest epoch"
                    add(f"flintlock_task_{key}", labels, sub.get(key), text, "gauge")
                for op, figures in sub.get("operators", {}).items():
                    self._add_operator(add, {**labels, "operator_name": op}, figures)

    @staticmethod
    def _add_operator(add: Any, labels: dict[str, str], figures: dict[str, Any]) -> None:
        for key in OPERATOR_GAUGES:
            text = f"{key}, latest epoch"
            add(f"flintlock_operator_{key}", labels, figures.get(key), text, "gauge")
        user = figures.get("user", {})
        for name, value in user.get("gauges", {}).items():
            add(
                f"flintlock_operator_user_{metric_name(name)}", labels, value, "user gauge", "gauge"
            )
        for name, meter in user.get("meters", {}).items():
            base = f"flintlock_operator_user_{metric_name(name)}"
            add(f"{base}_rate", labels, meter["rate"], "user meter, events per second", "gauge")
        for name, statistics in user.get("histograms", {}).items():
            base = f"flintlock_operator_user_{metric_name(name)}"
            for stat, value in statistics.items():
                add(f"{base}_{metric_name(stat)}", labels, value, "user histogram", "gauge")


def exposition(collector: FlintlockCollector) -> str:
    """The collector's families in Prometheus' text format."""
    client = _client()
    registry = client.CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text: str = client.generate_latest(registry).decode()
    return text


class MetricsServer:
    """prometheus_client's own HTTP server, serving one collector on ``port``."""

    def __init__(self, collector: FlintlockCollector, port: int, address: str = "0.0.0.0"):
        client = _client()
        self.registry = client.CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        try:
            self.server, self.thread = client.start_http_server(port, address, self.registry)
        except OSError as error:
            raise MetricsUnavailable(
                f"cannot serve metrics on port {port} ({error.strerror or error}): give "
                f"another metrics_port (flintlock run --metrics-port)"
            ) from error

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen when asked for port 0)."""
        return int(self.server.server_port)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
