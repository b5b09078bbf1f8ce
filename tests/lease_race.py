"""Drivers that start one job at the same moment: each lease's outcome of ``acquire``."""

from __future__ import annotations

import threading

from flintlock.core.job.lease import JobLease
from flintlock.errors import JobLeaseError


def race_for_the_lease(leases: list[JobLease]) -> dict[str, str]:
    """Run id -> "holds" or the refusal, with every ``acquire`` released by one barrier."""
    barrier = threading.Barrier(len(leases))
    outcome: dict[str, str] = {}

    def start(lease: JobLease) -> None:
        barrier.wait()
        try:
            lease.acquire()
            outcome[lease.run_id] = "holds"
        except JobLeaseError as error:
            outcome[lease.run_id] = str(error)

    threads = [threading.Thread(target=start, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome
