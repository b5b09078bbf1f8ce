"""What the live page shows, as JSON read from checkpoint storage: the jobs under a
checkpoint directory (status from the lease, last epoch, last checkpoint, runs), one
job's report as the page draws it (graph, checkpoints, runs, failures, the latest
metrics) with its status, and one epoch's subtasks.

The job folders are the only source: the page works from any machine that sees the
storage, for a job whose driver runs anywhere, as ``flintlock status`` does."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint.job_folder import IDENTITY, JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage, list_folder
from flintlock.core.errors import FlintlockError, JobControlError
from flintlock.core.job.client import job_status
from flintlock.core.job.run_log import epoch_entry
from flintlock.report.model import read_report


def job_names(storage: CheckpointStorage) -> list[str]:
    """The jobs whose folders lie in the checkpoint directory ``storage`` opens, by name."""
    names = []
    for info in list_folder(storage.filesystem, storage.base_path):
        if info.type != pafs.FileType.Directory:
            continue
        identity = storage.read_json(f"{info.path}/{IDENTITY}", if_there=True)
        if isinstance(identity, dict) and isinstance(identity.get("job_name"), str):
            names.append(identity["job_name"])
    return sorted(names)


def jobs_document(storage: CheckpointStorage, only: str | None = None) -> dict[str, Any]:
    """Every job of the checkpoint directory with its status line; with ``only``, that
    job's alone, once it has started (a job's own page reads no other job's folder)."""
    names = job_names(storage) if only is None else [n for n in [only] if started(storage, n)]
    return {
        "checkpoint_dir": storage.uri(storage.base_path),
        "jobs": [job_line(storage, name) for name in names],
    }


def started(storage: CheckpointStorage, name: str) -> bool:
    """Whether job ``name`` has started in the directory: its folder has its identity."""
    return storage.exists(f"{JobFolder(storage, name).path}/{IDENTITY}")


def existing_folder(storage: CheckpointStorage, name: str) -> JobFolder:
    """The folder of job ``name``, opened, if it has started here: a page only reads, and
    opening a folder without an identity would make one (JobControlError instead)."""
    folder = JobFolder(storage, name)
    if not started(storage, name):
        raise JobControlError(f"job {name!r} has not started in {storage.uri(storage.base_path)}")
    folder.open()
    return folder


def job_line(storage: CheckpointStorage, name: str) -> dict[str, Any]:
    """One job's line in the jobs list: status, run, last epoch and checkpoint, runs."""
    try:
        folder = existing_folder(storage, name)
        status = job_status(folder)
    except FlintlockError as error:  # a job that never ran, a damaged status file
        return {"job_name": name, "status": "UNKNOWN", "error": str(error)}
    epochs = status.get("epochs") or []
    return {
        "job_name": name,
        "status": status["status"],
        "run_id": status.get("run_id"),
        "latest_checkpoint": status.get("latest_checkpoint"),
        "last_epoch": epochs[-1] if epochs else None,
        "heartbeat": status.get("heartbeat"),
        "error": status.get("error"),
    }


SHOWN = (
    "job_name",
    "job_id",
    "folder",
    "status",
    "vertices",
    "edges",
    "layouts",
    "runs",
    "epochs",
)
"""The report's parts the page draws as they are (its phases and older metrics stay out:
the page polls each second, and a long job's phases are thousands of rows)."""


def job_document(
    storage: CheckpointStorage, name: str, known: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One job's report as the page draws it, with its status and its latest epoch's
    metrics per vertex; JSON-ready (no NaN or infinity: JSON has none). ``known`` keeps
    the run log's entries between calls (each is read once)."""
    folder = existing_folder(storage, name)
    whole = read_report(folder, known)
    report = {key: getattr(whole, key) for key in SHOWN}
    report["failures"] = whole.failures
    latest = max(whole.metrics, default=None)
    vertices = whole.metrics[latest] if latest is not None else {}
    report["metrics"] = {"checkpoint_id": latest, "vertices": vertices}
    report = {key: _plain(value) for key, value in report.items()}
    try:
        report["live"] = job_status(folder)
    except FlintlockError as error:
        report["live"] = {"status": "UNKNOWN", "error": str(error)}
    document: dict[str, Any] = finite(report)
    return document


def checkpoint_document(
    storage: CheckpointStorage, name: str, checkpoint_id: int, known: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The run log's entry of one epoch (its subtasks: records, bytes, seconds, lifecycle
    phases, when each acknowledged), None if the log has none (pruned or never run)."""
    folder = JobFolder(storage, name)
    path = epoch_entry(folder, checkpoint_id)
    entry = known.get(path) or storage.read_json(path, if_there=True)
    if not isinstance(entry, dict):
        return None
    document: dict[str, Any] = finite(entry)
    return document


def finite(value: Any) -> Any:
    """``value`` with every non-finite float as None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """Dataclasses (and lists of them) as dicts, for JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
