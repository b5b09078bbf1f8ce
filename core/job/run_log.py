"""The job folder's run log: what ``flintlock report`` draws, kept as small JSON files.

Under ``<job folder>/_report/``: one file per run (its graph, when it started), one per
completed checkpoint (the epoch's figures and each subtask's acknowledged figures,
lifecycle phases included) and one per failure (task, operator, phase, cause). Written on
the driver once per epoch or failure, never per batch; the newest ``KEPT_EPOCHS`` epochs
are kept.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from flintlock.core.checkpoint.storage import list_folder
from flintlock.core.errors import RunLogError

if TYPE_CHECKING:
    from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
    from flintlock.core.checkpoint.job_folder import JobFolder
    from flintlock.core.checkpoint.storage import CheckpointStorage
    from flintlock.core.plan.execution import ExecutionPlan
    from flintlock.core.plan.graph import JobGraph

REPORT_DIR = "_report"
KEPT_EPOCHS = 500
"""Epoch files kept (the newest); older ones go when a multiple of ``PRUNE_EVERY`` is written."""
PRUNE_EVERY = 50
SUBTASK_FIELDS = (
    "task_name",
    "subtask_index",
    "attempt_id",
    "records_in",
    "records_out",
    "size_bytes",
    "duration_seconds",
    "finished",
    "lifecycle_phases",
    "metrics",
)
"""What the log keeps of each acknowledgement (not its manifest path or committables)."""


class RunLog:
    """Writes one job run's entries into the job's folder."""

    def __init__(self, folder: JobFolder, graph: JobGraph) -> None:
        self.folder = folder
        self.graph = graph
        self.path = f"{folder.path}/{REPORT_DIR}"
        self._runs_written: set[str] = set()

    def record_epoch(
        self, plan: ExecutionPlan, checkpoint: CompletedCheckpoint, figures: dict[str, Any]
    ) -> None:
        """A completed checkpoint's epoch: ``figures`` (duration, kind, watermarks when
        present), the checkpoint it restored, every subtask's figures and phases."""
        run_id = plan.run_id
        self.record_run(run_id)
        restores = list(plan.restores.values())
        subtasks = [
            {name: getattr(ack, name) for name in SUBTASK_FIELDS}
            for ack in checkpoint.acknowledgements
        ]
        document = {
            "run_id": run_id,
            "checkpoint_id": checkpoint.checkpoint_id,
            "restored_from": restores[0].checkpoint_id if restores else None,
            "figures": figures,
            "subtasks": subtasks,
        }
        _write(self.folder.storage, epoch_entry(self.folder, checkpoint.checkpoint_id), document)
        if checkpoint.checkpoint_id % PRUNE_EVERY == 0:
            self._prune()

    def record_run(self, run_id: str) -> None:
        """The run's own file, once, when it starts: when, and its graph (so a run that
        fails before its first checkpoint still shows its graph)."""
        if run_id in self._runs_written:
            return
        document = {"run_id": run_id, "started": time.time(), "graph": self.graph.to_json()}
        _write(self.folder.storage, f"{self.path}/runs/{run_id}.json", document)
        self._runs_written.add(run_id)

    def _prune(self) -> None:
        """Delete all but the newest ``KEPT_EPOCHS`` epoch files."""
        storage = self.folder.storage
        for path in _json_files(storage, f"{self.path}/epochs")[:-KEPT_EPOCHS]:
            storage.delete_file(path)


def epoch_entry(folder: JobFolder, checkpoint_id: int) -> str:
    """The run log's entry of the epoch of ``checkpoint_id``: its figures and subtasks."""
    return f"{folder.path}/{REPORT_DIR}/epochs/{checkpoint_id:010d}.json"


def record_failure(folder: JobFolder, run_id: str, error: BaseException) -> None:
    """A failed run's error: its FailureReport (task, subtask, operator, phase, cause)
    when a subtask reported one, else the error's type and message."""
    report = getattr(error, "report", None)
    document: dict[str, Any] = {
        "run_id": run_id,
        "time": time.time(),
        "error_type": type(error).__name__,
        "message": str(error),
        "report": asdict(report) if report is not None else None,
    }
    name = f"{time.time_ns()}-{run_id}.json"
    _write(folder.storage, f"{folder.path}/{REPORT_DIR}/failures/{name}", document)


def read_log(
    folder: JobFolder, known: dict[str, dict[str, Any]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every entry of the job's run log: runs, epochs and failures, each in time order.
    Each entry is written once and never changed, so a reader that asks again (the live
    page, each second) passes ``known`` and reads only the entries new since (by path)."""
    storage = folder.storage
    log: dict[str, list[dict[str, Any]]] = {}
    listed: set[str] = set()
    for kind in ("runs", "epochs", "failures"):
        entries = []
        for path in _json_files(storage, f"{folder.path}/{REPORT_DIR}/{kind}"):
            listed.add(path)
            document = known.get(path) if known is not None else None
            if document is None:
                document = storage.read_json(path)
                if not isinstance(document, dict):
                    raise RunLogError(f"the run log entry {path} is damaged")
                if known is not None:
                    known[path] = document
            entries.append(document)
        log[kind] = entries
    if known is not None:
        for gone in set(known) - listed:  # pruned epochs: forgotten too
            known.pop(gone, None)
    log["runs"].sort(key=lambda run: run.get("started", 0))
    return log


def _write(storage: CheckpointStorage, path: str, document: dict[str, Any]) -> None:
    """Write ``document`` whole or not at all (a temporary name, then a rename), compact:
    json encodes that in C, an indented document (as the checkpoint files are) in Python."""
    storage.write_bytes_atomically(path, json.dumps(document, separators=(",", ":")).encode())


def _json_files(storage: CheckpointStorage, directory: str) -> list[str]:
    """The ``.json`` files of ``directory`` by name (none if it does not exist)."""
    infos = list_folder(storage.filesystem, directory)
    return sorted(i.path for i in infos if i.is_file and i.path.endswith(".json"))
