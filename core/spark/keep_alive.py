"""Python workers kept alive across long pauses between epochs, so that the epoch after a
pause does not wait for new ones.

Spark stops a Python worker that has been idle for a minute (``PythonWorkerFactory``'s
``IDLE_WORKER_TIMEOUT_NS``, which no setting changes), and the next task pays a new one:
its imports of pyarrow and flintlock again (bench/RESULTS.md, "Python workers across long
pauses"). While a run waits for its next epoch, the driver runs a tiny Python stage every
``KEEP_ALIVE_SECONDS`` (``FLINTLOCK_KEEP_ALIVE_SECONDS``; 0 turns it off): one task per
core, held together for a moment so that each idle worker serves one and its idle clock
starts again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEEP_ALIVE_ENV = "FLINTLOCK_KEEP_ALIVE_SECONDS"
KEEP_ALIVE_SECONDS = 40.0
"""Idle seconds after which a waiting run touches its workers (Spark's limit is 60)."""
HOLD_SECONDS = 0.05
"""How long each keep-alive task holds its worker, so that the tasks overlap."""


def keep_alive_seconds() -> float:
    """The keep-alive period: FLINTLOCK_KEEP_ALIVE_SECONDS, else ``KEEP_ALIVE_SECONDS``."""
    value = os.environ.get(KEEP_ALIVE_ENV, "")
    return float(value) if value else KEEP_ALIVE_SECONDS


def keep_alive_group(job_name: str) -> str:
    """The Spark job group of a job's keep-alive stages (Spark's UI names them)."""
    return f"flintlock:{job_name}:keep-alive"


def keep_workers_alive(spark: SparkSession, job_name: str) -> None:
    """Run one task per core, each holding a Python worker for ``HOLD_SECONDS`` (not over
    Spark Connect, whose server keeps its own workers)."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext
        return
    workers = max(1, context.defaultParallelism)
    context.setJobGroup(
        keep_alive_group(job_name), f"flintlock job '{job_name}': keeping Python workers alive"
    )
    spark.range(0, workers, 1, workers).mapInArrow(_hold, "id long").toArrow()


def _hold(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    time.sleep(HOLD_SECONDS)
    yield from batches
