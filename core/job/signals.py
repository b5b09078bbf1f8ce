"""Ctrl-C and SIGTERM on a driver: the first asks for a stop, the second cancels.

``flintlock run`` installs ``stop_signals()`` around the job file. The first SIGINT or
SIGTERM asks every running unbounded job of the process to stop with a savepoint at its
next epoch boundary (the result store records STOPPED with it); a second one cancels:
Spark's running jobs are canceled from another thread and the job raises
``JobCanceled`` where it stands (the result store records CANCELED); a third one raises
KeyboardInterrupt at once. Nothing is raised inside the handler itself before the third:
an exception in the middle of a Py4J call would break the connection to Spark. Either
way the next start continues from the job's last checkpoint. Without the handlers (a
notebook, a plain script), Ctrl-C is Spark's own KeyboardInterrupt, which the job also
records as CANCELED.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from flintlock.core.errors import JobCanceled

_stop_requested = threading.Event()
_cancel_requested = threading.Event()
_cancel_reason: list[str] = []
_cancel_hooks: list[Callable[[], None]] = []
_handler: list[Callable[[int, FrameType | None], None]] = []
_announce: list[Callable[[str], None]] = []
"""The handler of the active ``stop_signals``, if any."""
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def announce(text: str) -> None:
    """Tell the person at the terminal (the active handlers' ``announce``), if any."""
    if _announce:
        _announce[-1](text)


def check_canceled() -> None:
    """Raise JobCanceled once a second stop signal asked to cancel the job."""
    if _cancel_requested.is_set():
        raise _canceled_by_signal()


def as_canceled(error: Exception) -> Exception:
    """``error`` as JobCanceled (its cause kept) if the job was canceled meanwhile: a
    canceled Spark job fails with an error of its own."""
    if not _cancel_requested.is_set() or (isinstance(error, JobCanceled) and error.by_signal):
        return error
    canceled = _canceled_by_signal()
    canceled.__cause__ = error
    return canceled


def _canceled_by_signal() -> JobCanceled:
    canceled = JobCanceled(f"the job was canceled ({_cancel_reason[-1]})")
    canceled.by_signal = True
    return canceled


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
        if len(received) == 2:
            say(f"{name} again: canceling the job ({name} once more to interrupt at once)")
            _cancel_reason.append(f"{name} received twice")
            _cancel_requested.set()
            threading.Thread(target=_run_cancel_hooks, name="flintlock-cancel").start()
            return
        raise KeyboardInterrupt(f"{name} received three times")

    previous = {number: signal.signal(number, handle) for number in SIGNALS}
    _handler.append(handle)
    _announce.append(say)
    _stop_requested.clear()
    _cancel_requested.clear()
    try:
        yield
    finally:
        _handler.remove(handle)
        _announce.remove(say)
        for number, handler in previous.items():
            signal.signal(number, handler)
        _stop_requested.clear()
        _cancel_requested.clear()


def _run_cancel_hooks() -> None:
    """Cancel what runs (Spark's jobs), off the main thread and its Py4J connection."""
    for hook in list(_cancel_hooks):
        with contextlib.suppress(Exception):
            hook()
