"""A handle on an unbounded job: savepoint, stop, status, result (``flintlock stop`` etc.)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flintlock.core.checkpoint.job_folder import IDENTITY, JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import JobControlError
from flintlock.core.job.control import JobControl
from flintlock.core.job.status import job_status

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
