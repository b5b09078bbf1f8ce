"""Keep PySpark's collection after every task off the worker's long-lived objects.

A reused PySpark worker runs a full ``gc.collect()`` after each task (``daemon.py``).
With pyarrow, PySpark and flintlock imported that scans a few hundred thousand objects:
35-40 ms of CPU per task on this machine, on 2 cores beside the JVM that feeds the
next task (bench/RESULTS.md, "The worker's collection after each task"). The first
flintlock task of a worker process collects once and freezes what is alive then
(``gc.freeze``): the modules and their functions, which live as long as the process.
Later collections scan only what came after. Objects frozen are still freed when their
count of references drops to zero; only reference cycles among them are never
collected, and that first task's own objects are all that could form one.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_long_lived_objects() -> None:
    """Once per process: collect, then freeze what is alive (``gc.freeze``)."""
    global _frozen
    if _frozen:
        return
    gc.collect()
    gc.freeze()
    _frozen = True
