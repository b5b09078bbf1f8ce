"""Places where a test pauses a real driver, as a long GC or a frozen VM would.

``FLINTLOCK_PAUSE_AT=<point>:<job name>:<checkpoint id>`` makes the driver, the first
time it reaches that point for that job at that checkpoint or a later one, create the
file ``FLINTLOCK_PAUSE_MARKER`` names and stop itself (SIGSTOP) until something sends it
SIGCONT. The fencing tests pause a driver between its lease check and its write this
way; unset, a point costs one environment lookup.
"""

from __future__ import annotations

import os
import signal

PAUSE_AT = "FLINTLOCK_PAUSE_AT"
PAUSE_MARKER = "FLINTLOCK_PAUSE_MARKER"
_paused: set[str] = set()


def pause_point(point: str, job_name: str, checkpoint_id: int) -> None:
    """Stop this process here if the environment asks for ``point`` of ``job_name`` at
    ``checkpoint_id`` or before it (once per process)."""
    wanted = os.environ.get(PAUSE_AT)
    if wanted is None or wanted in _paused:
        return
    where, _, at = wanted.rpartition(":")
    if where != f"{point}:{job_name}" or not at.isdigit() or checkpoint_id < int(at):
        return
    _paused.add(wanted)
    marker = os.environ.get(PAUSE_MARKER)
    if marker:
        with open(marker, "w") as file:
            file.write(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)
