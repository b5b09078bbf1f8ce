"""What user functions print() in local mode reaches the driver's terminal.

A Python worker's stdout goes to Spark's log, not to the person running the job. In
local mode (workers on the driver's machine) the driver names a folder in a Spark local
property; each task sends its ``sys.stdout`` to a file there, opened only if something
is printed, and the driver prints the files after the epoch's Spark job, in task order.
The cost is per task (one property read), never per record.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Any, TextIO

from flintlock.core.spark.helper_threads import helper_thread

OUTPUT_PROPERTY = "flintlock.task.stdout"
"""The Spark local property naming the folder tasks write their stdout to."""


class _FileOnFirstWrite(io.TextIOBase):
    """A text stream that creates its file only when something is written to it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file: TextIO | None = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.file is None:
            self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        return self.file.write(text)

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def close(self) -> None:
        super().close()  # flushes first
        if self.file is not None:
            self.file.close()


@contextlib.contextmanager
def captured_stdout() -> Iterator[None]:
    """In a Spark task: send ``sys.stdout`` to the driver's folder, if it named one."""
    from pyspark import TaskContext

    spark_task = TaskContext.get()
    folder = spark_task.getLocalProperty(OUTPUT_PROPERTY) if spark_task is not None else None
    if spark_task is None or not folder or not os.path.isdir(folder):
        yield
        return
    stream = _FileOnFirstWrite(os.path.join(folder, f"{spark_task.taskAttemptId():012d}.txt"))
    previous, sys.stdout = sys.stdout, stream
    try:
        yield
    finally:
        sys.stdout = previous
        stream.close()


class TaskOutputRelay:
    """On the driver, for one job run in local mode: a folder its tasks print into (named
    once, in a local property the run's settings put back at its end), printed and
    emptied after each epoch's Spark job, failed or not (a user's prints come first)."""

    def __init__(self, context: Any) -> None:
        self.folder = tempfile.mkdtemp(prefix="flintlock-task-stdout-")
        context.setLocalProperty(OUTPUT_PROPERTY, self.folder)

    @staticmethod
    def for_run(context: Any) -> TaskOutputRelay | None:
        """A relay if the session runs its workers on this machine (local mode)."""
        return TaskOutputRelay(context) if str(context.master).startswith("local") else None

    def relay(self) -> None:
        """Print what the tasks printed since the last call, in task order; forget it."""
        names = sorted(os.listdir(self.folder))
        for name in names:
            path = os.path.join(self.folder, name)
            with open(path, encoding="utf-8", errors="replace") as file:
                sys.stdout.write(file.read())
            os.remove(path)
        if names:
            sys.stdout.flush()

    def close(self) -> None:
        """Remove the folder (the run's settings put the property back), off the job's
        path: a folder's removal can be slow (bench/RESULTS.md, "The 1,000-row job planned
        once")."""
        helper_thread("folder-removal").submit(shutil.rmtree, self.folder, ignore_errors=True)
