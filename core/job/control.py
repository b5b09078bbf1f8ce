"""Requests to a running unbounded job, and its status, through its folder.

``flintlock savepoint|stop|status`` and ``JobClient`` (Python) write a request file into
``<job folder>/_control/``; the job master takes the oldest unanswered request at the
next epoch boundary and writes its answer beside it (``<id>.answer.json``: the
savepoint's path, or the error that failed it). The folder is the only channel, so a
request works from any process that sees the checkpoint storage.

A request is addressed to the run that holds the job's lease when it is made, and is
refused at once if no driver holds it (the job is not running). It expires with that
run: a new run removes the requests of earlier ones and never acts on them. A run that
ends answers what it did not take (a stop during the final epoch: with the final
checkpoint); the requester removes both files once it has read the answer.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow.fs as pafs

from flintlock.core.checkpoint.job_folder import JobFolder, newer_than
from flintlock.core.checkpoint.storage import list_folder
from flintlock.core.errors import CheckpointError, JobControlError, LeaseLostError
from flintlock.core.job import signals as job_signals
from flintlock.core.job.lease import LeaseHolder, read_holder

PROGRESS_ENV = "FLINTLOCK_PROGRESS"
"""Set to 1 by ``flintlock run``: unbounded jobs print ``progress_line`` per epoch."""
CONTROL = "_control"
STATUS = "_status.json"
ANSWER = ".answer.json"
KEPT_EPOCHS = 50
"""Epochs whose figures ``_status.json`` keeps (the newest)."""

SIGNAL = "signal"
"""The request id of a stop asked for by a signal to the driver (no file)."""
POLL_SECONDS = 0.05

Action = Literal["savepoint", "stop"]


@dataclass(frozen=True)
class ControlRequest:
    """A savepoint or a stop (with or without drain), asked of one run of a job."""

    request_id: str
    action: Action
    drain: bool = False
    run_id: str | None = None
    """The run the request was sent to (it expires with that run)."""

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
        """Ask the running job for a savepoint or a stop at its next epoch boundary; a
        JobControlError at once if no driver runs it."""
        if action not in ("savepoint", "stop"):
            raise JobControlError(f"unknown request {action!r}: savepoint or stop")
        if drain and action != "stop":
            raise JobControlError("only a stop drains (stop --drain)")
        holder = self.running_holder()
        if holder is None:
            raise JobControlError(
                f"job '{self.folder.job_name}' is not running ({self.not_running_reason()}): "
                f"the {'stop --drain' if drain else action} request is refused"
            )
        request_id = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        request = ControlRequest(request_id, action, drain, holder.run_id)
        document = {
            "action": action,
            "drain": drain,
            "run_id": holder.run_id,
            "requested": time.time(),
        }
        self.storage.write_json_atomically(f"{self.directory}/{request_id}.json", document)
        return request

    def running_holder(self) -> LeaseHolder | None:
        """The driver that runs the job now (a fresh lease), if any."""
        holder = read_holder(self.storage, self.folder.path)
        return holder if holder is not None and holder.holds() else None

    def not_running_reason(self) -> str:
        """Why the job is not running, for messages: its recorded end or last heartbeat."""
        record = self.folder.read_record()
        holder = read_holder(self.storage, self.folder.path)
        parts = [f"recorded {record.status} (run {record.run_id})" if record else "never ran"]
        if holder is not None:
            parts.append(f"its last driver, {holder.describe()}, is gone")
        return "; ".join(parts)

    def wait(self, request: ControlRequest, timeout: float = 300.0) -> dict[str, Any]:
        """The job's answer to ``request``; a JobControlError if it failed, or never came
        (at once once the run it was sent to ended). Both files are removed after."""
        path = f"{self.directory}/{request.request_id}{ANSWER}"
        deadline = time.monotonic() + timeout
        try:
            while not self.storage.exists(path):
                holder = self.running_holder()
                if holder is None or holder.run_id != request.run_id:
                    if self.storage.exists(path):
                        break
                    return self._answer_of_ended_run(request)
                if time.monotonic() > deadline:
                    raise JobControlError(
                        f"job '{self.folder.job_name}' did not answer the "
                        f"{request.describe()} request {request.request_id} within "
                        f"{timeout:.0f} s"
                    )
                time.sleep(POLL_SECONDS)
            answer = self.storage.read_json(path)
        finally:
            self.remove(request.request_id)
        if answer.get("error"):
            raise JobControlError(
                f"job '{self.folder.job_name}': the {request.describe()} failed: {answer['error']}"
            )
        return dict(answer)

    def _answer_of_ended_run(self, request: ControlRequest) -> dict[str, Any]:
        """A stop to a run that ended right after it was sent: the run's end answers it
        (its final checkpoint or savepoint); anything else is an error."""
        record = self.folder.read_record()
        ended = record is not None and record.run_id == request.run_id
        stopped = ended and request.action == "stop"
        if record is not None and stopped and record.status in ("FINISHED", "STOPPED"):
            last = record.checkpoint_id  # None: the run ended before its first checkpoint
            folder = self.folder
            checkpoint = None if last is None else folder.storage.uri(folder.checkpoint_dir(last))
            return {"savepoint": record.savepoint or checkpoint, "final": True}
        if ended and record is not None and record.status != "RUNNING":
            status = f"it ended {record.status}"
        else:
            status = "its driver is gone (killed or lost); send it again to the job's next run"
        raise JobControlError(
            f"job '{self.folder.job_name}' (run {request.run_id}) did not answer the "
            f"{request.describe()} request {request.request_id}: {status}"
        )

    def remove(self, request_id: str) -> None:
        """Delete a request and its answer (the requester, once it has the answer)."""
        for name in (f"{request_id}.json", f"{request_id}{ANSWER}"):
            self.storage.delete_file(f"{self.directory}/{name}")

    # ---- the job master's side ----

    def _files(self) -> list[str]:
        return sorted(
            info.base_name
            for info in list_folder(self.storage.filesystem, self.directory)
            if info.type == pafs.FileType.File
        )

    def pending(self, run_id: str) -> list[ControlRequest]:
        """This run's unanswered requests, oldest first; a damaged one is an error."""
        names = self._files()
        answered = {name[: -len(ANSWER)] for name in names if name.endswith(ANSWER)}
        requests = []
        for name in names:
            if name.endswith(ANSWER) or not name.endswith(".json"):
                continue
            request_id = name[: -len(".json")]
            if request_id in answered:
                continue
            path = f"{self.directory}/{name}"
            try:
                document = self.storage.read_json(path)
            except CheckpointError:
                if not self.storage.exists(path):
                    continue  # removed by its requester meanwhile
                raise
            if not isinstance(document, dict) or document.get("action") not in (
                "savepoint",
                "stop",
            ):
                raise CheckpointError(f"the control request {path} is damaged: {document!r}")
            if document.get("run_id") == run_id:
                requests.append(
                    ControlRequest(
                        request_id, document["action"], bool(document.get("drain")), run_id
                    )
                )
        return requests

    def next_request(self, run_id: str) -> ControlRequest | None:
        """The oldest unanswered request sent to run ``run_id``, if any."""
        requests = self.pending(run_id)
        return requests[0] if requests else None

    def expire_requests(self, run_id: str) -> list[str]:
        """Remove every request (and answer) not sent to ``run_id``: a run starts with no
        request of an earlier run. Returns the files removed."""
        removed = []
        for name in self._files():
            path = f"{self.directory}/{name}"
            request_id = name.removesuffix(ANSWER).removesuffix(".json")
            request = f"{self.directory}/{request_id}.json"
            try:
                document = self.storage.read_json(request, if_there=True) or {}
            except CheckpointError:
                document = {}  # damaged: it cannot belong to this run
            if not isinstance(document, dict) or document.get("run_id") != run_id:
                self.storage.delete_file(path)
                removed.append(path)
        return removed

    def answer(self, request: ControlRequest, **fields: Any) -> None:
        """Record the outcome of ``request`` (``savepoint=path`` or ``error=text``)."""
        if request.request_id == SIGNAL:  # asked for by Ctrl-C: tell the terminal
            if fields.get("error"):
                job_signals.announce(f"the stop failed: {fields['error']}")
            else:
                job_signals.announce(
                    f"stopped with savepoint {fields.get('savepoint')}; the next start "
                    f"continues from it"
                )
            return
        path = f"{self.directory}/{request.request_id}{ANSWER}"
        self.storage.write_json_atomically(path, {"answered": time.time(), **fields})

    def answer_remaining(self, run_id: str, **answer: Any) -> None:
        """Answer every request a run ends without taking: a stop with how the run ended
        (during the final epoch: its final checkpoint), a savepoint with an error. The
        lease is still held, so a request that comes later is refused at once."""
        for request in self.pending(run_id):
            if request.action == "stop" and "error" not in answer:
                self.answer(request, **answer)
            else:
                error = answer.get("error") or "the job ended before it took the savepoint"
                self.answer(request, error=error)

    # ---- status ----

    def write_status(self, document: dict[str, Any]) -> None:
        """The job's status file (``flintlock status``): state, epochs, savepoints.
        Fenced by the write itself (no newer generation's status is replaced), so no
        lease check before it (a request less per epoch on an object store)."""
        epochs = document.get("epochs", [])
        generation = self.folder.generation
        document = {**document, "epochs": epochs[-KEPT_EPOCHS:], "lease_generation": generation}
        path = f"{self.folder.path}/{STATUS}"
        if not self.storage.replace_json_if(
            path, document, lambda there: not newer_than(there, generation)
        ):
            raise LeaseLostError(
                f"job '{self.folder.job_name}': a driver of a newer lease generation wrote the "
                f"job's status {path}: this one (generation {generation}) lost its lease"
            )

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
