"""Requests to a running unbounded job, and its status, through its folder.

``flintlock savepoint|stop|status`` and ``JobClient`` (Python) write a request file into
``<job folder>/_control/``; the job master takes the oldest unanswered request at the
next epoch boundary and writes its answer beside it (``<id>.answer.json``: the
savepoint's path, or the error that failed it). The folder is the only channel, so a
request works from any process that sees the checkpoint storage.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow.fs as pafs

from flintlock.core.job_errors import CheckpointError, JobControlError
from flintlock.core.job_folder import JobFolder

PROGRESS_ENV = "FLINTLOCK_PROGRESS"
"""Set to 1 by ``flintlock run``: unbounded jobs print ``progress_line`` per epoch."""
CONTROL = "_control"
STATUS = "_status.json"
ANSWER = ".answer.json"
KEPT_EPOCHS = 50
"""Epochs whose figures ``_status.json`` keeps (the newest)."""

Action = Literal["savepoint", "stop"]


@dataclass(frozen=True)
class ControlRequest:
    """A savepoint or a stop (with or without drain), asked of a running job."""

    request_id: str
    action: Action
    drain: bool = False

    def describe(self) -> str:
        """``stop --drain``, ``stop`` or ``savepoint``, for messages."""
        return "stop --drain" if self.drain else self.action


class JobControl:
    """Writes, finds and answers the requests of one job; keeps its status file."""

    def __init__(self, folder: JobFolder) -> None:
        self.folder = folder
        self.storage = folder.storage
        self.directory = f"{folder.path}/{CONTROL}"

    # ---- the requesting side ----

    def request(self, action: Action, drain: bool = False) -> ControlRequest:
        """Ask the job for a savepoint or a stop; taken at its next epoch boundary."""
        if action not in ("savepoint", "stop"):
            raise JobControlError(f"unknown request {action!r}: savepoint or stop")
        if drain and action != "stop":
            raise JobControlError("only a stop drains (stop --drain)")
        request = ControlRequest(f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}", action, drain)
        document = {"action": action, "drain": drain, "requested": time.time()}
        self.storage.write_json_atomically(f"{self.directory}/{request.request_id}.json", document)
        return request

    def wait(
        self,
        request: ControlRequest,
        timeout: float = 300.0,
        alive: Callable[[], bool] | None = None,
    ) -> dict[str, Any]:
        """The job's answer to ``request``; a JobControlError if it failed or never came
        (at once if ``alive`` says the job's thread ended)."""
        path = f"{self.directory}/{request.request_id}{ANSWER}"
        deadline = time.monotonic() + timeout
        while not self.storage.exists(path):
            if alive is not None and not alive() and not self.storage.exists(path):
                raise JobControlError(
                    f"job '{self.folder.job_name}' ended without answering the "
                    f"{request.describe()} request {request.request_id}"
                )
            if time.monotonic() > deadline:
                raise JobControlError(
                    f"job '{self.folder.job_name}' did not answer the {request.describe()} "
                    f"request {request.request_id} within {timeout:.0f} s: is it running?"
                )
            time.sleep(0.05)
        answer = self.storage.read_json(path)
        if answer.get("error"):
            raise JobControlError(
                f"job '{self.folder.job_name}': the {request.describe()} failed: {answer['error']}"
            )
        return dict(answer)

    # ---- the job master's side ----

    def next_request(self) -> ControlRequest | None:
        """The oldest request without an answer, if any; a damaged one is an error."""
        selector = pafs.FileSelector(self.directory, allow_not_found=True)
        names = sorted(
            info.base_name
            for info in self.storage.filesystem.get_file_info(selector)
            if info.type == pafs.FileType.File
        )
        answered = {name[: -len(ANSWER)] for name in names if name.endswith(ANSWER)}
        for name in names:
            if name.endswith(ANSWER) or not name.endswith(".json"):
                continue
            request_id = name[: -len(".json")]
            if request_id in answered:
                continue
            path = f"{self.directory}/{name}"
            document = self.storage.read_json(path)
            if not isinstance(document, dict) or document.get("action") not in (
                "savepoint",
                "stop",
            ):
                raise CheckpointError(f"the control request {path} is damaged: {document!r}")
            return ControlRequest(request_id, document["action"], bool(document.get("drain")))
        return None

    def answer(self, request: ControlRequest, **fields: Any) -> None:
        """Record the outcome of ``request`` (``savepoint=path`` or ``error=text``)."""
        path = f"{self.directory}/{request.request_id}{ANSWER}"
        self.storage.write_json_atomically(path, {"answered": time.time(), **fields})

    # ---- status ----

    def write_status(self, document: dict[str, Any]) -> None:
        """The job's status file (``flintlock status``): state, epochs, savepoints."""
        epochs = document.get("epochs", [])
        document = {**document, "epochs": epochs[-KEPT_EPOCHS:]}
        self.storage.write_json_atomically(f"{self.folder.path}/{STATUS}", document)

    def read_status(self) -> dict[str, Any] | None:
        """The job's status file, if the job ever ran as epochs."""
        path = f"{self.folder.path}/{STATUS}"
        if not self.storage.exists(path):
            return None
        document = self.storage.read_json(path)
        if not isinstance(document, dict):
            raise CheckpointError(f"the job status {path} is damaged")
        return document


def progress_line(figures: dict[str, Any]) -> str:
    """One epoch in one line: its checkpoint, duration, records per vertex, state size."""
    records_in = figures.get("records_in", {})
    records = ", ".join(
        f"{name} {records_in.get(name, 0):,} -> {count:,}"
        for name, count in figures["records_out"].items()
    )
    kind = figures["kind"] + (" (final)" if figures.get("final") else "")
    return (
        f"epoch {figures['epoch']}  chk-{figures['checkpoint_id']} {kind}  "
        f"{figures['seconds']:.2f} s  records in -> out: {records}  "
        f"state {figures['checkpoint_bytes'] / 1e3:,.1f} kB"
    )
