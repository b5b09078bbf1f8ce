"""PrintSink: writes each batch's rows to standard output (debugging; not exactly-once).

A plain SinkFunction, not a 2PC sink: rows are printed as they arrive, so an epoch run
again prints them again. On Spark a worker's standard output reaches the driver's terminal
only in local mode (``core/spark/task_output.py``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

import pyarrow as pa

from flintlock import SinkFunction, hookimpl


class PrintSink(SinkFunction):
    """Prints ``prefix> row`` per row; flushes the stream in finish()."""

    def __init__(self, prefix: str = "", stream: TextIO | None = None) -> None:
        self.prefix = prefix
        self.stream = stream

    def write_batch(self, batch: pa.RecordBatch) -> None:
        stream = self.stream or sys.stdout
        lead = f"{self.prefix}> " if self.prefix else ""
        stream.write("".join(f"{lead}{row}\n" for row in batch.to_pylist()))

    def finish(self) -> None:
        (self.stream or sys.stdout).flush()


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("print", PrintSink)
