"""A handle on an unbounded job: savepoint, stop, status, result (``flintlock stop`` etc.),
and what ``flintlock status`` and ``JobClient.status()`` say about a job, from its folder.

Four things speak for a job: the lease (is a driver running it now?), the result store
(how its last run ended), the status file (the epochs of the run that wrote it last) and
the checkpoints folder (its latest completed checkpoint). A job is RUNNING only under a
fresh lease; a run recorded RUNNING without one is NOT_RUNNING since its last heartbeat
(its driver was killed or lost). The status describes one run: the status file's epochs
are shown only for the run it describes (a new run has none until its first epoch
completes), while the latest checkpoint is the job's, whichever run completed it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import IDENTITY, JobFolder, JobRecord
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import JobControlError
from flintlock.core.job.control import JobControl
from flintlock.core.job.lease import LeaseHolder, read_holder

if TYPE_CHECKING:
    from flintlock.core.job.result import JobExecutionResult


class JobClient:
    """Controls the job (checkpoint dir, job name) through its folder: from the process
    that runs it (``execute_async``) or from any other that sees the storage."""

    def __init__(self, checkpoint_dir: str | CheckpointStorage, job_name: str) -> None:
        storage = (
            checkpoint_dir
            if isinstance(checkpoint_dir, CheckpointStorage)
            else CheckpointStorage.from_uri(checkpoint_dir)
        )
        self.folder = JobFolder(storage, job_name)
        self.job_name = job_name
        self._thread: threading.Thread | None = None
        self._result: JobExecutionResult | None = None
        self._error: BaseException | None = None

    def start(self, run: Callable[[], JobExecutionResult]) -> None:
        """Run ``run`` (the job) in a driver thread; ``result()`` joins it."""

        def body() -> None:
            try:
                self._result = run()
            except BaseException as error:  # handed to result()
                self._error = error

        self._thread = threading.Thread(target=body, name=f"flintlock-{self.job_name}")
        self._thread.start()

    def savepoint(self, timeout: float = 300.0) -> str:
        """Take a savepoint at the next epoch boundary; the job keeps running. Its path."""
        control = self._control(timeout)
        answer = control.wait(control.request("savepoint"), timeout)
        return str(answer["savepoint"])

    def stop(self, drain: bool = False, timeout: float = 300.0) -> str:
        """Stop with a savepoint at the next epoch boundary (``drain``: end the input
        first: timers fire, finish, last data committed). The savepoint's path; the final
        checkpoint's if the request came during the job's final epoch."""
        control = self._control(timeout)
        answer = control.wait(control.request("stop", drain), timeout)
        if self._thread is not None:
            self.result(timeout)
        return str(answer["savepoint"])

    def status(self) -> dict[str, Any]:
        """The job's status: RUNNING under a driver's fresh lease, NOT_RUNNING since its
        last heartbeat if its driver is gone, else how its last run ended (with its
        result); its latest checkpoint, savepoint and per-epoch figures."""
        return job_status(self._folder())

    def is_running(self) -> bool:
        """True while the job run this client started (``execute_async``) goes on."""
        return self._thread is not None and self._thread.is_alive()

    def result(self, timeout: float | None = None) -> JobExecutionResult:
        """Wait for the job run this client started to end; its result or its error."""
        if self._thread is None:
            raise JobControlError("this client did not start the job (execute_async does)")
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise JobControlError(f"job '{self.job_name}' still runs after {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None  # the thread ended with a result or an error
        return self._result

    def _folder(self) -> JobFolder:
        """The job's folder; a job that never started here is an error (no request may
        create a job's folder)."""
        folder = self.folder
        if not folder.storage.exists(f"{folder.path}/{IDENTITY}"):
            raise JobControlError(
                f"there is no job '{self.job_name}' in {folder.storage.base_path} "
                f"(no {folder.path}/{IDENTITY}): has it ever started there?"
            )
        folder.open()
        return folder

    def _control(self, timeout: float) -> JobControl:
        """The job's control channel. For a job this client started, first wait (up to
        ``timeout``) until its driver holds the job's lease: a request made before would
        find the job not running."""
        deadline = time.monotonic() + timeout
        while self.is_running() and time.monotonic() < deadline:
            if self.folder.storage.exists(f"{self.folder.path}/{IDENTITY}"):
                control = JobControl(self._folder())
                if control.running_holder() is not None:
                    return control
            time.sleep(0.05)
        return JobControl(self._folder())


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
