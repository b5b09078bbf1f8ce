"""One subtask's metrics of one epoch, taken when it acknowledges its snapshot: counted
per batch while it ran, read once here, and sent in its acknowledgement.

A Spark task reaches the driver only through the messages it yields, so its figures ride
in the acknowledgement it sends anyway, once per subtask and epoch; they are counted per
batch or event, never per record."""

from __future__ import annotations

import functools
import os
import re
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow.fs as pafs

from flintlock.core.events import MAX_TIMESTAMP, MIN_TIMESTAMP

if TYPE_CHECKING:
    from flintlock.core.checkpoint.snapshots import OperatorSnapshot
    from flintlock.core.checkpoint.storage import CheckpointStorage
    from flintlock.core.runtime.operator import StreamOperator

T = TypeVar("T")


class IdleClock:
    """Time a task spent waiting for its input: the rest of its time is busy (Flink's
    ``busyTimeMsPerSecond`` is the share of a second a task was neither idle nor blocked)."""

    def __init__(self) -> None:
        self.idle_seconds = 0.0

    def timed(self, events: Iterator[T]) -> Iterator[T]:
        """``events``, each wait for the next one added to ``idle_seconds`` (per event,
        and an event is a batch, a watermark or a control event: never one record)."""
        clock = time.perf_counter
        iterator = iter(events)
        while True:
            waited = clock()
            try:
                event = next(iterator)
            except StopIteration:
                self.idle_seconds += clock() - waited
                return
            self.idle_seconds += clock() - waited
            yield event


def watermark_or_none(timestamp: int) -> int | None:
    """An operator's input watermark in ms, None before the first one."""
    return None if timestamp <= MIN_TIMESTAMP else int(timestamp)


def state_sizes(
    storage: CheckpointStorage, snapshots: dict[str, OperatorSnapshot]
) -> dict[str, int]:
    """Bytes of each operator's state files in the snapshot (one listing call for those
    whose size the storage does not know from writing them)."""
    paths: dict[str, str] = {}
    for name, snapshot in snapshots.items():
        files = [f.path for f in [*snapshot.keyed, *snapshot.operator_state]]
        if snapshot.timers is not None:
            files.append(snapshot.timers)
        paths.update(dict.fromkeys(files, name))
    sizes = dict.fromkeys(snapshots, 0)
    for path in list(paths):
        size = storage.written_size(path)  # known without a request on an object store
        if size is not None:
            sizes[paths.pop(path)] += size
    if not paths:
        return sizes
    listed = storage.filesystem.get_file_info(list(paths))
    for name, info in zip(paths.values(), listed, strict=True):
        if info.type == pafs.FileType.File and info.size is not None:
            sizes[name] += info.size
    return sizes


def operator_metrics(
    operators: list[StreamOperator],
    records_in: int,
    chained_rows: list[int],
    tail_records_out: int,
    state_bytes: dict[str, int],
) -> dict[str, dict[str, Any]]:
    """Per operator of a chain: records in and out, input watermark, state size and its
    user metrics. ``chained_rows[i]`` rows went from operator i to i + 1."""
    ins = [records_in, *chained_rows]
    outs = [*chained_rows, tail_records_out]
    document = {}
    for op, rows_in, rows_out in zip(operators, ins, outs, strict=True):
        group = getattr(getattr(op, "context", None), "metrics", None)
        written = int(getattr(op, "records_written", 0))  # a sink: rows sent out
        document[op.name] = {
            "numRecordsIn": int(rows_in),
            "numRecordsOut": int(rows_out) + written,
            "currentInputWatermark": watermark_or_none(op.current_watermark),
            "stateSizeBytes": state_bytes.get(op.name, 0),
            "user": group.values() if group is not None else {},
        }
    return document


EXECUTOR_IN_LOG_URL = re.compile(r"[?&]executorId=([^&]+)")
ANCESTORS_TO_SEARCH = 4
"""A Python worker's executor JVM is its parent, or its grandparent (pyspark's daemon
forks the workers); a few more allow a wrapper in between."""


def executor_of_this_process() -> dict[str, Any]:
    """Where a subtask ran: Spark's executor id (None in local mode, where the driver runs
    every task), host and Python worker pid."""
    return {"id": executor_id(), "host": socket.gethostname(), "pid": os.getpid()}


@functools.cache
def executor_id() -> str | None:
    """The id of the executor whose JVM started this Python worker, or None.

    A Python worker cannot ask its JVM, and ``TaskContext`` has no executor id (its local
    property ``spark.executor.id`` is the driver's, "driver", on every executor): the
    executor JVM's own ``--executor-id`` argument, which every cluster manager passes,
    is read from /proc; where there is no /proc, ``SPARK_EXECUTOR_ID`` (Kubernetes) or
    the log URL a standalone worker gives its executors (``...&executorId=3&...``)."""
    found = executor_id_of_ancestors(os.getpid())
    if found is not None:
        return found
    if "SPARK_EXECUTOR_ID" in os.environ:
        return os.environ["SPARK_EXECUTOR_ID"]
    in_log_url = EXECUTOR_IN_LOG_URL.search(os.environ.get("SPARK_LOG_URL_STDERR", ""))
    return in_log_url.group(1) if in_log_url else None


def executor_id_of_ancestors(pid: int) -> str | None:
    """The ``--executor-id`` argument of the nearest of ``pid``'s parents that has one
    (Linux' /proc); None if none of the next few has one, or /proc cannot tell."""
    for _ in range(ANCESTORS_TO_SEARCH):
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                pid = int(stat.read().rsplit(b")", 1)[1].split()[1])  # the parent's pid
            if pid <= 1:
                return None
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                arguments = cmdline.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            return None
        if b"--executor-id" in arguments[:-1]:
            return arguments[arguments.index(b"--executor-id") + 1].decode(errors="replace")
    return None


def subtask_metrics(
    *,
    records_in: int,
    records_out: int,
    duration_seconds: float,
    idle_seconds: float,
    checkpoint_seconds: float,
    checkpoint_bytes: int,
    operators: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The ``metrics`` of a TaskAcknowledgement: the task's figures and its operators'."""
    head = next(iter(operators.values()), None)
    return {
        "time": time.time(),
        "numRecordsIn": int(records_in),
        "numRecordsOut": int(records_out),
        "durationMs": duration_seconds * 1e3,
        "busyTimeMs": max(duration_seconds - idle_seconds, 0.0) * 1e3,
        "idleTimeMs": idle_seconds * 1e3,
        "currentInputWatermark": head["currentInputWatermark"] if head else None,
        "stateSizeBytes": sum(m["stateSizeBytes"] for m in operators.values()),
        "checkpointDurationMs": checkpoint_seconds * 1e3,
        "checkpointSizeBytes": int(checkpoint_bytes),
        "operators": operators,
        "executor": executor_of_this_process(),
    }


def is_max(timestamp: int | None) -> bool:
    """True for MAX_WATERMARK (an ended input), whose lag means nothing."""
    return timestamp is not None and timestamp >= MAX_TIMESTAMP
