"""The driver's record of a run's metrics: one JSON document per epoch under the job's
folder (``metrics/<run id>/epoch-<n>.json``), the latest in Prometheus' text format
(``metrics/metrics.prom``), an HTTP endpoint on demand, and the run's summary.

They are files in the job's folder so that another process reads them too
(``flintlock metrics JOB``), while the job runs or after; the Prometheus file is
rewritten at most every ``PROMETHEUS_FILE_SECONDS``, so short epochs back to back do not
each pay a rewrite."""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint.storage import CheckpointStorage, list_folder
from flintlock.core.metrics import prometheus
from flintlock.core.metrics.aggregate import add_epoch, epoch_document, new_totals, run_totals

if TYPE_CHECKING:
    from flintlock.core.checkpoint.snapshots import TaskAcknowledgement

METRICS_ENV = "FLINTLOCK_METRICS"
"""``0`` turns metrics off for ``execute()`` calls that do not say."""
METRICS_PORT_ENV = "FLINTLOCK_METRICS_PORT"
"""A port to serve Prometheus metrics on (``flintlock run --metrics-port``)."""
METRICS_DIR = "metrics"
PROMETHEUS_FILE = "metrics.prom"
EPOCH_FILE = re.compile(r"epoch-(\d+)\.json")
PROMETHEUS_FILE_SECONDS = 1.0
"""The Prometheus file is rewritten at most this often (and at the run's end): short
epochs back to back would otherwise each pay a rewrite (bench/RESULTS.md, "Fixed cost
per job and per epoch")."""


def metrics_options(metrics: bool | None, port: int | None) -> tuple[bool, int | None]:
    """``execute``'s metrics switch and port, the environment's where it says none."""
    if metrics is None:
        metrics = os.environ.get(METRICS_ENV, "1") not in ("0", "false", "off")
    if port is None and os.environ.get(METRICS_PORT_ENV):
        port = int(os.environ[METRICS_PORT_ENV])
    return metrics, port


def metrics_dir(job_path: str, run_id: str) -> str:
    """Where one run's per-epoch documents are kept, under the job's folder."""
    return f"{job_path}/{METRICS_DIR}/{run_id}"


class MetricsRecorder:
    """Aggregates each epoch's acknowledgements, keeps them, and serves them."""

    def __init__(
        self,
        storage: CheckpointStorage,
        job_path: str,
        job_name: str,
        run_id: str,
        enabled: bool = True,
        port: int | None = None,
    ) -> None:
        self.storage = storage
        self.job_path = job_path
        self.run_id = run_id
        self.enabled = enabled
        self.port = port
        self.epochs: list[dict[str, Any]] = []
        self.totals = new_totals()
        self.collector = prometheus.FlintlockCollector(job_name)
        self.prometheus = enabled and (port is not None or prometheus.available())
        self.server: prometheus.MetricsServer | None = None
        self._file_written = float("-inf")
        self._file_behind = False
        """An epoch newer than the Prometheus file is recorded (written at ``close``)."""
        self._last_recorded: float | None = None
        """When the previous epoch was recorded (``time.monotonic()``)."""

    def start(self) -> None:
        """Serve the metrics over HTTP if a port was asked for (a clear error without
        prometheus_client)."""
        if self.port is not None and self.enabled:
            self.server = prometheus.MetricsServer(self.collector, self.port)

    def close(self) -> None:
        """Bring the Prometheus file up to the last epoch; stop the HTTP endpoint."""
        if self._file_behind:
            self.write_prometheus_file()
        if self.server is not None:
            self.server.close()
            self.server = None

    def record(
        self, acknowledgements: list[TaskAcknowledgement], epoch: dict[str, Any]
    ) -> dict[str, Any] | None:
        """One epoch's metrics (None when off): aggregated, written, served."""
        if not self.enabled:
            return None
        document = epoch_document(
            acknowledgements,
            {**epoch, "run_id": self.run_id, "intervalSeconds": self._interval(epoch)},
        )
        self.epochs.append(document)
        add_epoch(self.totals, document)
        folder = metrics_dir(self.job_path, self.run_id)
        self.storage.write_json(f"{folder}/epoch-{len(self.epochs):06d}.json", document)
        if self.prometheus:
            self.collector.update(document, self.totals)  # the endpoint serves it at once
            self._file_behind = True
            if time.monotonic() - self._file_written >= PROMETHEUS_FILE_SECONDS:
                self.write_prometheus_file()
        return document

    def _interval(self, epoch: dict[str, Any]) -> float:
        """The wall-clock seconds this epoch's figures cover: since the previous epoch was
        recorded (the trigger's wait included), or the epoch's own ``seconds`` for a run's
        first; never less than the epoch took."""
        now = time.monotonic()
        seconds = float(epoch.get("seconds") or 0.0)
        if self._last_recorded is not None:
            seconds = max(seconds, now - self._last_recorded)
        self._last_recorded = now
        return round(seconds, 4)

    def write_prometheus_file(self) -> None:
        """The latest epoch in Prometheus' text format, renamed into place whole."""
        path = f"{self.job_path}/{METRICS_DIR}/{PROMETHEUS_FILE}"
        self.storage.write_bytes_atomically(path, prometheus.exposition(self.collector).encode())
        self._file_written, self._file_behind = time.monotonic(), False

    def summary(self) -> dict[str, Any]:
        """The run's metrics: its epochs' documents and their totals (empty when off)."""
        if not self.enabled:
            return {}
        return {"run_id": self.run_id, "epochs": list(self.epochs), "totals": self.totals}


def read_run_metrics(storage: CheckpointStorage, job_path: str, run_id: str) -> dict[str, Any]:
    """A run's metrics as ``MetricsRecorder.summary`` gave them, read back from the job's
    folder (empty if the run kept none)."""
    folder = metrics_dir(job_path, run_id)
    found = sorted(
        (int(match.group(1)), info.path)
        for info in list_folder(storage.filesystem, folder)
        if (match := EPOCH_FILE.fullmatch(info.base_name))
    )
    if not found:
        return {}
    epochs = [storage.read_json(path) for _, path in found]
    return {"run_id": run_id, "epochs": epochs, "totals": run_totals(epochs)}


def latest_run(storage: CheckpointStorage, job_path: str) -> str | None:
    """The run whose metrics were written last, if any run kept metrics."""
    runs = [
        info
        for info in list_folder(storage.filesystem, f"{job_path}/{METRICS_DIR}")
        if info.type == pafs.FileType.Directory
    ]
    if not runs:
        return None
    latest: str = max(runs, key=lambda info: info.mtime_ns or 0).base_name
    return latest
