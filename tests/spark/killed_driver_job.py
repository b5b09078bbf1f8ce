"""A job whose driver process is SIGKILLed at a chosen point of its commit (once).

``python killed_driver_job.py BASE POINT``: POINT is ``before-commit`` (the final
checkpoint completed, nothing committed) or ``after-commit`` (from post_commit: every
row committed, the job's result not yet recorded). Run by test_job_result_store.py,
which then starts the same job again in its own process.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
from job_scripts import start_session

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.files import FileSink

ROWS = 2000


def die_once(base: str, point: str, where: str) -> None:
    marker = os.path.join(base, f"killed-{where}")
    if point == where and not os.path.exists(marker):
        with open(marker, "w") as file:
            file.write("killed once\n")
        os.kill(os.getpid(), signal.SIGKILL)


class DyingFileSink(FileSink):
    def __init__(self, path: str, base: str, point: str) -> None:
        super().__init__(path)
        self.base, self.point = base, point

    def commit(self, context: Any, committables: list[Any]) -> None:
        die_once(self.base, self.point, "before-commit")
        super().commit(context, committables)

    def post_commit(self, context: Any, committables: list[Any]) -> None:
        die_once(self.base, self.point, "after-commit")


class CommitDiesAfterOneFile(FileSink):
    """Moves one file, then fails — once (a marker file remembers it failed)."""

    def __init__(self, path: str, marker: str) -> None:
        super().__init__(path, rows_per_file=100)
        self.marker = marker

    def commit_file(self, filesystem: pafs.FileSystem, file: dict[str, str]) -> None:
        super().commit_file(filesystem, file)
        if not Path(self.marker).exists():
            Path(self.marker).write_text("failed once")
            raise OSError("injected: the disk went away after one file")


def build(spark: Any, base: str, sink: FileSink) -> tuple[StreamExecutionEnvironment, CollectSink]:
    """The job both processes build: rows -> FileSink, and the same rows collected."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    stream = env.from_collection([{"v": i} for i in range(ROWS)], batch_size=100)
    stream.sink_to(sink, name="files")
    collect = CollectSink("rows")
    stream.sink_to(collect, name="rows")
    return env, collect


if __name__ == "__main__":
    base, point = sys.argv[1], sys.argv[2]
    spark = start_session("local[2]")
    env, _ = build(spark, base, DyingFileSink(f"{base}/out", base, point))
    env.execute("killed")
    print("RESULT not killed")
