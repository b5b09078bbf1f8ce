"""Ctrl-C and SIGTERM on a driver: the first asks for a stop, the second cancels.

``flintlock run`` installs ``stop_signals()`` around the job file. The first SIGINT or
SIGTERM asks every running unbounded job of the process to stop with a savepoint at its
next epoch boundary (the result store records STOPPED with it); a second one cancels:
Spark's running jobs are canceled and ``JobCanceled`` is raised in the driver (the
result store records CANCELED). Either way the next start continues from the job's last
checkpoint. Without the handlers (a notebook, a plain script), Ctrl-C is Spark's own
KeyboardInterrupt, which the job also records as CANCELED.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from flintlock.core.job_errors import JobCanceled

_stop_requested = threading.Event()
_cancel_hooks: list[Callable[[], None]] = []
_handler: list[Callable[[int, FrameType | None], None]] = []
"""The handler of the active ``stop_signals``, if any."""
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_requested() -> bool:
    """True once a first stop signal arrived (the epoch loop stops at its next boundary)."""
    return _stop_requested.is_set()


@contextlib.contextmanager
def on_cancel(hook: Callable[[], None]) -> Iterator[None]:
    """Call ``hook`` (e.g. cancel Spark's jobs) if a second signal cancels while inside."""
    _cancel_hooks.append(hook)
    try:
        yield
    finally:
        _cancel_hooks.remove(hook)


def reclaim() -> None:
    """Put the stop handlers back (a new SparkContext installs its own for SIGINT)."""
    if _handler and threading.current_thread() is threading.main_thread():
        for number in SIGNALS:
            signal.signal(number, _handler[-1])


@contextlib.contextmanager
def stop_signals(announce: Callable[[str], None] | None = None) -> Iterator[None]:
    """Handle SIGINT and SIGTERM as stop, then cancel, while inside (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    say = announce or (lambda text: print(f"flintlock: {text}", file=sys.stderr, flush=True))

    def handle(number: int, frame: FrameType | None) -> None:
        received.append(number)
        name = signal.Signals(number).name
        if len(received) == 1:
            _stop_requested.set()
            say(
                f"{name}: stopping at the next epoch boundary with a savepoint "
                f"({name} again cancels the job)"
            )
            return
        say(f"{name} again: canceling the job")
        for hook in list(_cancel_hooks):
            with contextlib.suppress(Exception):
                hook()
        raise JobCanceled(f"the job was canceled ({name} received twice)")

    previous = {number: signal.signal(number, handle) for number in SIGNALS}
    _handler.append(handle)
    _stop_requested.clear()
    try:
        yield
    finally:
        _handler.remove(handle)
        for number, handler in previous.items():
            signal.signal(number, handler)
        _stop_requested.clear()
