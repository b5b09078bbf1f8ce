"""What ``flintlock status`` and ``JobClient.status()`` say about a job, from its folder.

Four things speak for a job: the lease (is a driver running it now?), the result store
(how its last run ended), the status file (the epochs of the run that wrote it last) and
the checkpoints folder (its latest completed checkpoint). A job is RUNNING only under a
fresh lease; a run recorded RUNNING without one is NOT_RUNNING since its last heartbeat
(its driver was killed or lost). The status describes one run: the status file's epochs
are shown only for the run it describes (a new run has none until its first epoch
completes), while the latest checkpoint is the job's, whichever run completed it.
"""

from __future__ import annotations

from typing import Any

from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import JobFolder, JobRecord
from flintlock.core.errors import JobControlError
from flintlock.core.job.control import JobControl
from flintlock.core.job.lease import LeaseHolder, read_holder

NOT_RUNNING = "NOT_RUNNING"


def job_status(folder: JobFolder) -> dict[str, Any]:
    """The job's status document: ``status`` (RUNNING, NOT_RUNNING, or how the last run
    ended) and ``run_id`` of the run it describes, ``latest_checkpoint`` (the job's latest
    completed checkpoint), ``heartbeat`` (the lease's last renewal, epoch seconds), the
    recorded result, and the epochs and trigger of that run from the status file."""
    document = JobControl(folder).read_status() or {}
    record = folder.read_record()
    holder = read_holder(folder.storage, folder.path)
    if not document and record is None and holder is None:
        raise JobControlError(f"job '{folder.job_name}' has not run here yet")
    described = described_run(record, holder, document)
    if document.get("run_id", described["run_id"]) != described["run_id"]:
        document = {}  # another run's epochs: the described run has completed none yet
    status: dict[str, Any] = {
        "job_name": folder.job_name,
        "job_id": folder.job_id,
        "epochs": [],
        **document,
        **described,
        "latest_checkpoint": latest_checkpoint(folder, record),
        "heartbeat": holder.renewed if holder is not None else None,
        "recorded_status": record.status if record is not None else None,
    }
    if described["status"] == NOT_RUNNING:
        since = holder.renewed if holder is not None else None
        if since is None and status["epochs"]:
            since = status["epochs"][-1].get("time")
        status["since"] = since
    return status


def described_run(
    record: JobRecord | None, holder: LeaseHolder | None, document: dict[str, Any]
) -> dict[str, Any]:
    """Which run the status describes and its state: the lease's holder while it holds,
    else the run the result store recorded (how it ended, or NOT_RUNNING if it was still
    recorded RUNNING), else the run of the stale lease or of the status file."""
    if holder is not None and holder.holds():
        return {
            "status": "RUNNING",
            "run_id": holder.run_id,
            "host": holder.host,
            "pid": holder.pid,
        }
    if record is not None and record.status != "RUNNING":
        return {
            "status": record.status,
            "run_id": record.run_id,
            "result": record.result,
            "error": record.error,
            "savepoint": record.savepoint,
        }
    run_id: str | None
    if record is not None:
        run_id = record.run_id
    else:
        run_id = holder.run_id if holder is not None else document.get("run_id")
    return {"status": NOT_RUNNING, "run_id": run_id}


def latest_checkpoint(folder: JobFolder, record: JobRecord | None) -> int | None:
    """The job's latest completed checkpoint, whichever run completed it: the newest in
    its checkpoints folder, or the one its result store names if that is newer (a
    FAILED run's record names none, though its checkpoints are there)."""
    latest = CheckpointCoordinator(folder).latest()
    ids = [latest.checkpoint_id if latest is not None else None]
    ids.append(record.checkpoint_id if record is not None else None)
    known = [checkpoint_id for checkpoint_id in ids if checkpoint_id is not None]
    return max(known) if known else None
