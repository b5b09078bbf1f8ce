"""What one driver per job costs on the driver (issue 19), without Spark.

    python bench/job_bookkeeping.py [--calls 500]

Times, on the local file system, the steps every epoch gained: the fencing check before
each publishing write (5 per epoch), the commit record's entry, the removal of dead
attempts' staging (``FileSink.abort_uncommitted``) and the control poll; and, once per
job, acquiring and releasing the lease. The baseline, timed in the same run, is a step
every epoch had before: writing the status file (``JobControl.write_status``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

from flintlock.core.api.sink import CommitContext
from flintlock.core.checkpoint.commit_log import CommitLog
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.job.control import JobControl
from flintlock.core.job.lease import JobLease
from flintlock.sinks.files import FileSink


def per_call_ms(step: Callable[[int], object], calls: int) -> float:
    started = time.perf_counter()
    for i in range(calls):
        step(i)
    return (time.perf_counter() - started) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    calls = parser.parse_args().calls
    base = tempfile.mkdtemp(prefix="flintlock-bench-")
    folder = JobFolder(CheckpointStorage.from_uri(f"{base}/chk"), "bench")
    lease = JobLease(folder.storage, folder.path, "bench", "run1")
    started = time.perf_counter()
    lease.acquire()
    acquire = (time.perf_counter() - started) * 1e3
    folder.open()
    folder.lease = lease
    log, control, sink = CommitLog(folder), JobControl(folder), FileSink(f"{base}/out")
    context = CommitContext("bench", "run1", 1, folder.storage, job_id=folder.job_id)
    status = {"status": "RUNNING", "epochs": [{"epoch": 1}]}
    baseline = per_call_ms(lambda i: control.write_status(status), calls)
    steps = {
        "fencing check (x5 per epoch)": per_call_ms(lambda i: folder.fence("bench"), calls),
        "commit record entry": per_call_ms(lambda i: log.record(i + 1, "run1"), calls),
        "staging of dead attempts": per_call_ms(
            lambda i: sink.abort_uncommitted(context, []), calls
        ),
        "control poll": per_call_ms(lambda i: control.next_request("run1"), calls),
    }
    started = time.perf_counter()
    lease.release()
    release = (time.perf_counter() - started) * 1e3
    print(f"baseline: status file write {baseline:.3f} ms per epoch")
    for name, ms in steps.items():
        print(f"{name:<32} {ms:.3f} ms  {ms / baseline:.2f}x the status write")
    fences, *others = steps.values()
    per_epoch = 5 * fences + sum(others[:2])
    print(f"added per epoch: {per_epoch:.3f} ms ({per_epoch / baseline:.2f}x the status write)")
    print(f"once per job: acquire the lease {acquire:.2f} ms, release {release:.2f} ms")


if __name__ == "__main__":
    main()
