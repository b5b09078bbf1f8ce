"""Writes to an object store sent side by side: each is a request's round trip there, and
a subtask's snapshot writes files that do not depend on each other (its states' files
and its manifest, acknowledged only once all are written)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

Retry = Callable[[str, str, Callable[[], None]], None]
"""How a write is tried again on a transient error: (path, action, call)."""

_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()


def _requests() -> ThreadPoolExecutor:
    """The process's pool for writes sent side by side (made on first use: a Python
    worker forked from Spark's daemon starts without threads)."""
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=8, thread_name_prefix="flintlock-put"))
        return _pool[0]


class SideBySide:
    """Where a thread's writes go while it has a block open: sent at once, waited for
    when the block ends (its first error raised then); elsewhere they run in line."""

    def __init__(self, retry: Retry) -> None:
        self._retry = retry
        self._local = threading.local()

    def __reduce__(self) -> tuple[Any, ...]:
        return SideBySide, (self._retry,)  # a thread's open block never travels

    @contextlib.contextmanager
    def block(self) -> Iterator[None]:
        """Writes of this thread within the block go side by side; all are done when it
        ends, and the first that failed raises (after every other one ended)."""
        if getattr(self._local, "sent", None) is not None:
            yield  # within an outer block: it waits
            return
        sent: list[Future[None]] = []
        self._local.sent = sent
        try:
            yield
        finally:
            self._local.sent = None
            wait(sent)
        for future in sent:
            future.result()

    def write(self, path: str, call: Callable[[], None]) -> None:
        """``call()`` (a write of ``path``): in line (its caller retries it), or sent if a
        block is open, and retried there."""
        sent: list[Future[None]] | None = getattr(self._local, "sent", None)
        if sent is None:
            call()
            return
        sent.append(_requests().submit(self._retry, path, "write", call))
