"""Drivers of the unbounded test job (unbounded_jobs.py) that need a process of their own,
for tests/spark/test_one_driver_per_job.py. Prints ``READY`` once Spark is up and one
``RESULT`` line of JSON at the end.

``python driver_jobs.py MODE BASE``:

- ``together``: waits for ``BASE/go`` after Spark started (so that two drivers start the
  job at the same moment), then runs it; a start refused by the lease is a RESULT too;
- ``worker-kill``: under ``local[2,4]``, the sink's subtask 0 kills its Python worker in
  pre_commit of checkpoint 2, once (its staged file stays behind: the driver cleans up);
- ``killed``: renews its lease every 0.5 s and SIGKILLs itself after 2 epochs;
- ``paused``: renews its lease every 0.5 s and stops itself (SIGSTOP) right after its
  lease check for checkpoint 3, before it publishes it, until the test sends SIGCONT;
- ``sigint`` (run as ``flintlock run driver_jobs.py -- sigint BASE``): epochs every 0.3 s
  until Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import unbounded_jobs
from job_scripts import print_result, start_session
from pyspark import cloudpickle

from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.fences import PAUSE_AT, PAUSE_MARKER
from flintlock.core.errors import FlintlockError
from flintlock.sinks.files import FileSink

END = 3000
SIGINT_END = 30000


class KillsItsWorkerOnce(FileSink):
    """A FileSink whose subtask 0 dies in pre_commit of checkpoint 2, once: its staged
    file, closed and complete, is left behind by an attempt that never acknowledged."""

    def __init__(self, path: str, marker: str) -> None:
        super().__init__(path)
        self.marker = marker

    def pre_commit(self, transaction: Any) -> list[Any]:
        files = super().pre_commit(transaction)
        if "-chk2-0-" in transaction.stem and files:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return files
            os.kill(os.getpid(), signal.SIGKILL)
        return files


def run(mode: str, base: str) -> dict[str, Any]:
    if mode == "together":
        spark = start_session("local[2]")
        print("READY", flush=True)
        while not Path(base, "go").exists():
            time.sleep(0.01)
        try:
            result = unbounded_jobs.build(spark, base, end=END).execute("unbounded")
        except FlintlockError as error:
            return {"refused": f"{type(error).__name__}: {error}"}
        return {"status": result.status, "run_id": result.run_id}
    if mode == "worker-kill":
        spark = start_session("local[2,4]")
        sink = KillsItsWorkerOnce(f"{base}/out", f"{base}/killed-worker")
        result = unbounded_jobs.build(spark, base, end=1500, sink=sink).execute("unbounded")
        return {"status": result.status, "epochs": result.epochs}
    if mode == "killed":
        env = unbounded_jobs.build(start_session("local[2]"), base, end=END, lease_seconds=0.5)
        env.execute("unbounded", progress=unbounded_jobs.killed_after(2))
        return {"status": "not killed"}
    if mode == "paused":
        os.environ[PAUSE_AT] = "publish-checkpoint:unbounded:3"
        os.environ[PAUSE_MARKER] = f"{base}/paused"
        env = unbounded_jobs.build(start_session("local[2]"), base, end=END, lease_seconds=0.5)
        try:
            result = env.execute("unbounded")
        except FlintlockError as error:
            return {"refused": f"{type(error).__name__}: {error}"}
        return {"status": result.status, "run_id": result.run_id}
    if mode == "sigint":
        env = unbounded_jobs.build(None, base, end=SIGINT_END)
        result = env.execute("sigint", trigger=EpochTrigger.processing_time(0.3))
        return {"status": result.status, "savepoint": result.savepoint_path}
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    print_result(run(sys.argv[1], sys.argv[2]))
