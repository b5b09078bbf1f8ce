"""Named single helper threads, one per process each: work the driver hands off its
job's path (a partition count, a folder's removal) runs there, in order.

One thread per name, kept for the process's life: the py4j connection a thread opens is
made once rather than per job, and the work handed to it runs in the order it was given."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

_threads: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def helper_thread(name: str) -> ThreadPoolExecutor:
    """The process's helper thread ``name``, started on first use; Python waits for its
    queued work at exit. One thread: the py4j connection it opens is made once."""
    with _lock:
        if name not in _threads:
            _threads[name] = ThreadPoolExecutor(1, thread_name_prefix=f"flintlock-{name}")
        return _threads[name]
