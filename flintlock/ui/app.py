"""The live page's web app (Starlette): the page itself and the JSON it polls, read from
checkpoint storage at each request; savepoint and stop requests only when control is on.

Routes: ``/`` the page; ``/api/jobs`` every job; ``/api/jobs/{name}`` one job's report and
status; ``/api/jobs/{name}/checkpoints/{id}`` one epoch's subtasks; ``POST
/api/jobs/{name}/savepoint`` and ``/stop`` (``?drain=1``) the job's requests, answered as
``flintlock savepoint`` and ``flintlock stop`` answer them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import FlintlockError, JobControlError
from flintlock.core.job.client import JobClient
from flintlock.ui.page import PAGE
from flintlock.ui.state import checkpoint_document, job_document, jobs_document, started

CONTROL_HEADER = "X-Flintlock-Control"
"""A request from the page carries it: a browser sends no such header to another origin
without asking it first (CORS), which this app never allows, so no other web page a
user has open can stop their jobs (cross-site request forgery)."""

REQUEST_TIMEOUT = 300.0
"""Seconds a savepoint or stop from the page waits for the job to answer (the CLI's)."""


@dataclass(frozen=True)
class Target:
    """What the page shows: the jobs of a checkpoint directory, or only ``job``."""

    storage: CheckpointStorage
    job: str | None = None
    control: bool = False
    """Whether the page may send savepoint and stop requests (off: read-only)."""
    known: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Per job, the run log's entries read so far (each is written once: read once)."""

    def shows(self, name: str) -> bool:
        """Whether job ``name`` is on this page: its one job, or any job that has started
        in the directory (one lookup of its identity, not a listing of every job)."""
        if self.job is not None:
            return name == self.job
        return started(self.storage, name)


class Shown:
    """What a server shows now: a job's own page (``execute(ui_port=...)``) moves on to
    the next job its process runs."""

    def __init__(self, target: Target) -> None:
        self.target = target


def create_app(shown: Shown) -> Starlette:
    """The web app serving ``shown``'s target."""

    def page(request: Request) -> Response:
        return HTMLResponse(PAGE)

    def jobs(request: Request) -> Response:
        target = shown.target
        document = jobs_document(target.storage, target.job)
        document["control"] = target.control
        return JSONResponse(document)

    def job(request: Request) -> Response:
        target = shown.target
        name = request.path_params["name"]
        if not target.shows(name):
            return _error(404, f"no job {name!r} here")
        try:
            known = target.known.setdefault(name, {})
            return JSONResponse(job_document(target.storage, name, known))
        except FlintlockError as error:
            return _error(409, str(error))

    def checkpoint(request: Request) -> Response:
        target = shown.target
        name, checkpoint_id = request.path_params["name"], request.path_params["id"]
        if not target.shows(name):
            return _error(404, f"no job {name!r} here")
        known = target.known.setdefault(name, {})
        document = checkpoint_document(target.storage, name, checkpoint_id, known)
        if document is None:
            return _error(404, f"job {name!r} has no epoch of checkpoint {checkpoint_id} logged")
        return JSONResponse(document)

    def request_of(action: str) -> Any:
        def send(request: Request) -> Response:
            target = shown.target
            name = request.path_params["name"]
            if not target.control:
                return _error(
                    403, "read-only: start `flintlock ui` with --control to send requests"
                )
            if request.headers.get(CONTROL_HEADER) != "1":
                return _error(403, f"a request needs the {CONTROL_HEADER} header (the page's)")
            if not target.shows(name):
                return _error(404, f"no job {name!r} here")
            client = JobClient(target.storage, name)
            try:
                if action == "savepoint":
                    return JSONResponse({"savepoint": client.savepoint(REQUEST_TIMEOUT)})
                drain = request.query_params.get("drain") in ("1", "true")
                return JSONResponse({"savepoint": client.stop(drain, REQUEST_TIMEOUT)})
            except JobControlError as error:
                return _error(409, str(error))

        return send

    return Starlette(
        routes=[
            Route("/", page),
            Route("/api/jobs", jobs),
            Route("/api/jobs/{name:path}/savepoint", request_of("savepoint"), methods=["POST"]),
            Route("/api/jobs/{name:path}/stop", request_of("stop"), methods=["POST"]),
            Route("/api/jobs/{name:path}/checkpoints/{id:int}", checkpoint),
            Route("/api/jobs/{name:path}", job),
        ]
    )


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)
