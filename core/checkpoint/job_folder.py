"""A job's folder in checkpoint storage: who the job is, and how its last run ended.

A job is (checkpoint directory, job name). Its folder ``<checkpoint dir>/<encoded name>``
holds ``_job.json`` (the name and a job id made at the first start, checked at every
start and against every checkpoint's metadata) and ``_result.json``, the job result store
(Flink's FLIP-194): RUNNING while a run goes on, then FINISHED with the run's result, or
FAILED with its error, STOPPED (an unbounded job stopped, perhaps with a savepoint) or
CANCELED. A start that finds FINISHED returns that result and runs nothing. While a
driver holds the job's lease (``job_lease``), every write here is fenced by it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from flintlock.core.checkpoint.storage import CheckpointStorage, safe_name
from flintlock.core.errors import CheckpointError, JobIdentityError, LeaseLostError

if TYPE_CHECKING:
    from flintlock.core.job.lease import JobLease

IDENTITY = "_job.json"
RESULT = "_result.json"
COMMITS = "_commits"
MAX_ENCODED_NAME = 200
"""Longest encoded job name: leaves room under the 255-byte file name limit."""

JobStatus = Literal["RUNNING", "FINISHED", "FAILED", "STOPPED", "CANCELED"]
STATUSES = ("RUNNING", "FINISHED", "FAILED", "STOPPED", "CANCELED")


def check_job_name(job_name: object) -> str:
    """The job name if it can name a job folder; a JobIdentityError otherwise."""
    if not isinstance(job_name, str) or not job_name:
        raise JobIdentityError(f"a job name must be a non-empty string, got {job_name!r}")
    if len(safe_name(job_name)) > MAX_ENCODED_NAME:
        raise JobIdentityError(
            f"job name {job_name[:40]!r}... is too long for a folder name "
            f"({len(safe_name(job_name))} characters encoded, at most {MAX_ENCODED_NAME})"
        )
    return job_name


@dataclass(frozen=True)
class JobRecord:
    """What ``_result.json`` says about the last run of a job."""

    status: JobStatus
    run_id: str
    checkpoint_id: int | None = None
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    savepoint: str | None = None


class JobFolder:
    """The folder of one job: its identity file, result store and checkpoints folder."""

    def __init__(self, storage: CheckpointStorage, job_name: str) -> None:
        self.storage = storage
        self.job_name = check_job_name(job_name)
        self.path = storage.job_dir(job_name)
        self.checkpoints = f"{self.path}/checkpoints"
        self.commits = f"{self.path}/{COMMITS}"
        self._job_id: str | None = None
        self.lease: JobLease | None = None
        """The lease of the driver run that uses this folder, once it holds one."""

    @property
    def generation(self) -> int | None:
        """The lease generation of the driver run using this folder: its fencing token,
        written into everything it publishes (None without a lease)."""
        return self.lease.generation if self.lease is not None else None

    def fence(self, action: str) -> None:
        """The fencing check before the driver publishes: a LeaseLostError if its lease
        was taken over, removed or not renewed in time (no check without a lease)."""
        if self.lease is not None:
            self.lease.check(action)

    @property
    def job_id(self) -> str:
        """The id made at the job's first start (``open()`` must have run)."""
        if self._job_id is None:
            raise JobIdentityError(f"job '{self.job_name}': open() its folder first")
        return self._job_id

    def open(self) -> str:
        """Read the job's identity, or make it at the first start; returns the job id.

        A folder whose identity names another job is refused, naming the file."""
        path = f"{self.path}/{IDENTITY}"
        if not self.storage.exists(path):
            document = {
                "job_name": self.job_name,
                "job_id": uuid.uuid4().hex,
                "created": time.time(),
            }
            self.storage.create_json_once(path, document)  # of two first starts, one id
        document = self.storage.read_json(path)
        if not isinstance(document, dict) or not isinstance(document.get("job_id"), str):
            raise CheckpointError(f"the job identity file {path} has no job id: it is damaged")
        if document.get("job_name") != self.job_name:
            raise CheckpointError(
                f"the job folder {self.path} belongs to job {document.get('job_name')!r}, "
                f"not {self.job_name!r} (its identity file {path}): use another checkpoint "
                f"directory or job name"
            )
        job_id = str(document["job_id"])  # checked above to be a str
        self._job_id = job_id
        return job_id

    def run_dir(self, run_id: str) -> str:
        """The folder of one run of this job."""
        return self.storage.run_dir(self.job_name, run_id)

    def checkpoint_dir(self, checkpoint_id: int) -> str:
        """Where checkpoint ``checkpoint_id`` is published: ``checkpoints/chk-<id>``."""
        return f"{self.checkpoints}/chk-{checkpoint_id}"

    def checkpoint_file(self, checkpoint_id: int, name: str) -> str:
        """A file of checkpoint ``checkpoint_id``'s folder (its metadata, its marker)."""
        return f"{self.checkpoint_dir(checkpoint_id)}/{name}"

    def commit_record(self, checkpoint_id: int) -> str:
        """The record that the sinks committed checkpoint ``checkpoint_id``."""
        return f"{self.commits}/chk-{checkpoint_id}.json"

    def run_checkpoint_dir(self, run_id: str, checkpoint_id: int) -> str:
        """Where a run's subtasks write their snapshots of ``checkpoint_id``."""
        return self.storage.run_checkpoint_dir(self.job_name, run_id, checkpoint_id)

    # ---- the job result store ----

    def read_record(self) -> JobRecord | None:
        """How the last run ended (or that it is running), if any run was recorded."""
        path = f"{self.path}/{RESULT}"
        document = self.storage.read_json(path, if_there=True)
        if document is None:
            return None
        try:
            if document["job_id"] != self.job_id:
                raise CheckpointError(
                    f"the job result {path} belongs to job id {document['job_id']}, not to "
                    f"this job ({self.job_name!r}, id {self.job_id})"
                )
            if document["status"] not in STATUSES:
                raise ValueError(f"unknown status {document['status']!r}")
            return JobRecord(
                status=document["status"],
                run_id=str(document["run_id"]),
                checkpoint_id=document.get("checkpoint_id"),
                result=dict(document.get("result") or {}),
                error=document.get("error"),
                savepoint=document.get("savepoint"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"the job result {path} is damaged: {error!r}") from error

    def record_running(self, run_id: str) -> None:
        """A run starts: a later start must not take an older FINISHED as this run's end."""
        self._write_record("RUNNING", run_id)

    def record_finished(self, run_id: str, checkpoint_id: int, result: dict[str, Any]) -> None:
        """The run ended and its last data is committed: store its result for later starts."""
        self._write_record("FINISHED", run_id, checkpoint_id=checkpoint_id, result=result)

    def record_stopped(
        self, run_id: str, checkpoint_id: int, savepoint: str | None, result: dict[str, Any]
    ) -> None:
        """An unbounded run stopped (a stop request, or its trigger ran out): the next
        start continues from its last checkpoint (``savepoint`` if the stop took one)."""
        self._write_record(
            "STOPPED", run_id, checkpoint_id=checkpoint_id, savepoint=savepoint, result=result
        )

    def record_failed(self, run_id: str, error: BaseException) -> None:
        """The run failed; the next start retries it (a pending commit, or anew)."""
        self._write_record("FAILED", run_id, error=f"{type(error).__name__}: {error}")

    def record_canceled(self, run_id: str, checkpoint_id: int | None) -> None:
        """The run was canceled (a second Ctrl-C): the next start continues from the job's
        last checkpoint."""
        self._write_record("CANCELED", run_id, checkpoint_id=checkpoint_id)

    def _write_record(self, status: JobStatus, run_id: str, **fields: Any) -> None:
        self.fence(f"records the job's result ({status})")
        path = f"{self.path}/{RESULT}"
        generation = self.generation
        document = {
            "job_name": self.job_name,
            "job_id": self.job_id,
            "status": status,
            "run_id": run_id,
            "time": time.time(),
            "lease_generation": generation,
            **fields,
        }
        if not self.storage.replace_json_if(
            path, document, lambda there: not newer_than(there, generation)
        ):
            theirs = self.storage.read_json(path)
            raise LeaseLostError(
                f"job '{self.job_name}': run {theirs.get('run_id')} (lease generation "
                f"{theirs.get('lease_generation')}) recorded the job's result {path} after "
                f"this driver (run {run_id}, generation {generation}) lost its lease: "
                f"{status} is not recorded"
            )


def newer_than(there: object, generation: int | None) -> bool:
    """Whether the document ``there`` was written under a newer lease generation than
    ``generation``: a driver never replaces such a document (it lost its lease)."""
    theirs = there.get("lease_generation") if isinstance(there, dict) else None
    return generation is not None and isinstance(theirs, int) and theirs > generation
