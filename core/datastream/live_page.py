"""``execute(ui_port=...)``: the job's live page (``flintlock ui``), from its start.

The page lives in the package root (``flintlock/ui/``), which core/ never imports: the
root registers how to start it here (``register_starter``) when ``flintlock`` is imported,
so the dependencies still point one way (ARCHITECTURE.md, section 2)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

from flintlock.core.errors import GraphError
from flintlock.core.storage.options import StorageOptions

UI_PORT_ENV = "FLINTLOCK_UI_PORT"
"""``flintlock run --ui PORT`` sets it; ``execute`` reads it when not given ``ui_port``."""

Starter = Callable[[str, str, StorageOptions, int], contextlib.AbstractContextManager[str]]
"""(checkpoint dir, job name, storage options, port) -> the page, serving while entered,
its address as the value."""

_starters: list[Starter] = []


def register_starter(starter: Starter) -> None:
    """How ``execute`` starts a job's page (the package root registers flintlock's)."""
    _starters[:] = [starter]


def ui_port_option(ui_port: int | None) -> int | None:
    """``ui_port``, else ``FLINTLOCK_UI_PORT``'s; a port that is no port is an error."""
    if ui_port is None:
        text = os.environ.get(UI_PORT_ENV, "")
        if not text:
            return None
        try:
            ui_port = int(text)
        except ValueError:
            raise GraphError(f"{UI_PORT_ENV}={text!r} is no port number") from None
    if isinstance(ui_port, bool) or not isinstance(ui_port, int) or not 0 <= ui_port < 65536:
        raise GraphError(f"ui_port must be a port number (0: any free one), not {ui_port!r}")
    return ui_port


@contextlib.contextmanager
def live_page(
    port: int | None, checkpoint_dir: str, job_name: str, options: StorageOptions
) -> Iterator[None]:
    """Show the job's page on ``port`` (loopback) from the block's start; its address
    goes to standard error. Nothing when ``port`` is None."""
    if port is None:
        yield
        return
    if not _starters:
        raise GraphError("ui_port needs flintlock's web page: import flintlock first")
    with _starters[0](checkpoint_dir, job_name, options, port) as url:
        print(f"flintlock ui: {url} (job '{job_name}', read-only)", file=sys.stderr, flush=True)
        yield
