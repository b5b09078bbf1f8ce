"""``flintlock ui DIR``: serve the page until Ctrl-C; a flintlock error is one line."""

from __future__ import annotations

import sys
import threading
from typing import Any

from flintlock.core.errors import FlintlockError


def add_ui_command(commands: Any) -> None:
    """The ``ui`` sub-command of ``flintlock``."""
    ui = commands.add_parser(
        "ui",
        help="a live web page of the jobs in a checkpoint directory (the `ui` extra)",
        description="Serve a live web page of the jobs under DIR (a checkpoint directory) or "
        "of the one job whose folder DIR is: status, graph, checkpoints, runs, failures, "
        "updated without reload. Loopback only and read-only unless told otherwise.",
    )
    ui.add_argument("dir", metavar="DIR")
    ui.add_argument("--port", type=int, default=8081, help="the port (default 8081; 0: any)")
    ui.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1; 0.0.0.0 lets other hosts in)",
    )
    ui.add_argument(
        "--control",
        action="store_true",
        help="let the page take savepoints and stop jobs (off: the page only reads)",
    )


def ui_command(where: str, host: str, port: int, control: bool) -> int:
    """Serve the page of ``where`` on ``host:port`` until interrupted; the exit code."""
    try:
        import starlette  # noqa: F401  (the `ui` extra)
        import uvicorn  # noqa: F401
    except ImportError as error:
        print(
            f"flintlock: error: the web page needs the `ui` extra ({error.name} is missing): "
            f"pip install 'flintlock[ui]'",
            file=sys.stderr,
        )
        return 1
    from flintlock.ui.server import serve

    try:
        server = serve(where, host, port, control)
    except FlintlockError as error:
        print(f"flintlock: error: {error}", file=sys.stderr)
        return 1
    mode = "requests on" if control else "read-only"
    print(f"flintlock ui: {server.url} ({mode}; Ctrl-C ends it)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
