"""Places where a test pauses a real driver, as a long GC or a frozen VM would.

``FLINTLOCK_PAUSE_AT=<point>:<checkpoint id>`` makes the driver, once it reaches that
point for that checkpoint, create the file ``FLINTLOCK_PAUSE_MARKER`` names and stop
itself (SIGSTOP) until something sends it SIGCONT. The fencing tests pause a driver
between its lease check and its write this way; unset, a point costs one dict lookup.
"""

from __future__ import annotations

import os
import signal

PAUSE_AT = "FLINTLOCK_PAUSE_AT"
PAUSE_MARKER = "FLINTLOCK_PAUSE_MARKER"
_paused: set[str] = set()


def pause_point(point: str, checkpoint_id: int) -> None:
    """Stop this process here if the environment asks for ``point`` at ``checkpoint_id``
    (once per process)."""
    wanted = os.environ.get(PAUSE_AT)
    if wanted is None or wanted != f"{point}:{checkpoint_id}" or wanted in _paused:
        return
    _paused.add(wanted)
    marker = os.environ.get(PAUSE_MARKER)
    if marker:
        with open(marker, "w") as file:
            file.write(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)
