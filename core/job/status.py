"""What ``flintlock status`` and ``JobClient.status()`` say about a job, from its folder.

Three files speak for a job: the lease (is a driver running it now?), the result store
(how its last run ended) and the status file (its epochs). A job is RUNNING only under a
fresh lease; a run recorded RUNNING without one is NOT_RUNNING since its last heartbeat
(its driver was killed or lost), shown with its last epoch and checkpoint.
"""

from __future__ import annotations

from typing import Any

from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.job.control import JobControl
from flintlock.core.job.lease import read_holder
from flintlock.core.job_errors import JobControlError

NOT_RUNNING = "NOT_RUNNING"


def job_status(folder: JobFolder) -> dict[str, Any]:
    """The job's status document: ``status`` (RUNNING, NOT_RUNNING, or how the last run
    ended), ``heartbeat`` (the lease's last renewal, epoch seconds), the recorded result
    and the epochs of the status file."""
    document = JobControl(folder).read_status() or {}
    record = folder.read_record()
    holder = read_holder(folder.storage, folder.path)
    if not document and record is None and holder is None:
        raise JobControlError(f"job '{folder.job_name}' has not run here yet")
    status: dict[str, Any] = {
        "job_name": folder.job_name,
        "job_id": folder.job_id,
        "epochs": [],
        **document,
        "heartbeat": holder.renewed if holder is not None else None,
        "recorded_status": record.status if record is not None else None,
    }
    epochs = status["epochs"]
    if holder is not None and holder.holds():
        status.update(status="RUNNING", run_id=holder.run_id, host=holder.host, pid=holder.pid)
        return status
    if record is not None and record.status != "RUNNING":
        status.update(
            status=record.status,
            run_id=record.run_id,
            latest_checkpoint=record.checkpoint_id,
            result=record.result,
            error=record.error,
            savepoint=record.savepoint,
        )
        return status
    last_seen = holder.renewed if holder is not None else None
    if last_seen is None and epochs:
        last_seen = epochs[-1].get("time")
    status.update(status=NOT_RUNNING, since=last_seen)
    if record is not None:
        status["run_id"] = record.run_id
    return status
