"""The first flintlock task of a PySpark worker freezes the objects alive then, once
(``core/spark/stage.py: settle_worker_heap``): later tasks in that worker never
find more frozen (the first task's own frozen objects are freed when it ends), so
nothing a later task makes is frozen; and the worker's collector runs at flintlock's
thresholds (``TASK_GC_THRESHOLDS``), not CPython's defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.spark.stage import TASK_GC_THRESHOLDS

pytestmark = pytest.mark.slow


def frozen_in_worker(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Per batch: the worker's pid and how many objects it has frozen."""
    import gc
    import os

    rows = batch.num_rows
    return pa.record_batch(
        {
            "pid": pa.array([os.getpid()] * rows, pa.int64()),
            "frozen": pa.array([gc.get_freeze_count()] * rows, pa.int64()),
            "threshold": pa.array([list(gc.get_threshold())] * rows, pa.list_(pa.int64())),
        }
    )


def test_a_worker_freezes_its_long_lived_objects_once(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(0, 40, 1, 2)
    seen: dict[int, list[int]] = {}  # per worker, its frozen count in each job
    for run in range(4):
        env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
        table = (
            env.from_dataframe(frame).map_batch(frozen_in_worker).execute_and_collect(f"heap-{run}")
        )
        assert table.num_rows == 40
        counts = dict(
            zip(table.column("pid").to_pylist(), table.column("frozen").to_pylist(), strict=True)
        )
        for pid, frozen in counts.items():
            seen.setdefault(pid, []).append(frozen)
        assert set(map(tuple, table.column("threshold").to_pylist())) == {TASK_GC_THRESHOLDS}
    assert seen, "no worker reported"
    for pid, counts in seen.items():
        assert counts[0] > 10_000, (pid, counts)  # the modules and their functions
        assert counts == sorted(counts, reverse=True), (pid, counts)  # never frozen again
        assert len(set(counts[1:])) <= 1, (pid, counts)  # steady after the first task
