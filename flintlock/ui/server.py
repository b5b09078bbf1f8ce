"""The live page's server: the jobs under a checkpoint directory (or one job's folder),
served from this process on loopback by default, updated without reload.

The page reads the job folders, as ``flintlock status`` does, so it shows jobs whose
drivers run anywhere; it sends savepoint and stop requests only when control is on.
Needs the ``ui`` extra (Starlette and uvicorn)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from flintlock.core.checkpoint.job_folder import IDENTITY
from flintlock.core.checkpoint.paths import parent_folder
from flintlock.core.checkpoint.reader import storage_for
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import JobControlError
from flintlock.core.storage.options import StorageOptions
from flintlock.ui.app import Shown, Target, create_app

__all__ = ["UiServer", "job_page", "open_target", "serve"]

LOOPBACK = "127.0.0.1"


def open_target(where: str, control: bool = False) -> Target:
    """The jobs a page shows: those of the checkpoint directory ``where`` (a path or URI),
    or the one job whose folder ``where`` is."""
    storage = storage_for(where)
    identity = storage.read_json(f"{storage.base_path}/{IDENTITY}", if_there=True)
    if isinstance(identity, dict) and "job_name" in identity:
        parent = CheckpointStorage(
            storage.filesystem, parent_folder(storage.base_path), storage.uri_prefix
        )
        return Target(parent, str(identity["job_name"]), control)
    if not storage.filesystem.get_file_info(storage.base_path).type.name == "Directory":
        raise JobControlError(f"{where} is neither a checkpoint directory nor a job's folder")
    return Target(storage, None, control)


class UiServer:
    """The page's web server on a thread of this process; ``url`` once started."""

    def __init__(self, target: Target, host: str = LOOPBACK, port: int = 8081) -> None:
        import uvicorn

        self.shown = Shown(target)
        config = uvicorn.Config(
            create_app(self.shown), host=host, port=port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self, wait_seconds: float = 30.0) -> UiServer:
        """Listen, then serve in the background; returns once serving. A port that is
        taken is an error naming it (the socket is bound here, not by the server)."""
        host, port = self._server.config.host, self._server.config.port
        listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listening.bind((host, port))
            listening.listen(self._server.config.backlog)
        except OSError as error:
            listening.close()
            raise JobControlError(
                f"the web page cannot listen on {host}:{port}: {error.strerror or error} "
                f"(give another port, or 0 for any free one)"
            ) from None
        self._socket = listening
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [listening]},
            name="flintlock-ui",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + wait_seconds
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise JobControlError(f"the web page's server did not start on {host}:{port}")
            time.sleep(0.02)
        return self

    @property
    def url(self) -> str:
        """The page's address (the port the server bound, when it was asked for 0)."""
        assert self._socket is not None, "the server was not started"
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}/"

    def stop(self) -> None:
        """Stop serving and wait for the server's thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> UiServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(where: str, host: str = LOOPBACK, port: int = 8081, control: bool = False) -> UiServer:
    """Start the page for ``where`` (a checkpoint directory or a job's folder)."""
    return UiServer(open_target(where, control), host, port).start()


_job_pages: dict[int, UiServer] = {}
"""The port each job's page was asked for (0: any) -> its server, for this process."""
_job_pages_lock = threading.Lock()


@contextlib.contextmanager
def job_page(
    checkpoint_dir: str, job_name: str, options: StorageOptions, port: int
) -> Iterator[str]:
    """A job's own page (``execute(ui_port=...)``): loopback, read-only, its address as
    the value. The server starts with the first job that asks for it and stays for the
    process, as Spark's UI stays with its session: after the job it shows its end, and
    the next job of the process (asking for the same port) is shown there."""
    target = Target(CheckpointStorage.from_uri(checkpoint_dir, options), job_name)
    with _job_pages_lock:
        server = _job_pages.get(port)
        if server is None:
            server = _job_pages[port] = UiServer(target, LOOPBACK, port).start()
        server.shown.target = target
    yield f"{server.url}#job={quote(job_name)}"
