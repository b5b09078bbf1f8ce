"""Jobs run with task retries (``local[2,4]``) in their own process; prints JSON results.

Run by tests/spark/test_retries.py: a classic session with retries cannot share a
process with the suite's ``local[2]`` session.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from job_scripts import print_result, start_session

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.files import FileSink


def injected(name: str) -> RuntimeError:
    """Leave a marker that the failure really happened, and return the error to raise."""
    with open(os.path.join(os.environ["FLINTLOCK_TEST_MARKERS"], name), "w") as marker:
        marker.write("failed once\n")
    return RuntimeError(f"injected: {name}")


def first_attempt_of(subtask: int) -> bool:
    """True in attempt 0 of the given subtask's Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context is not None and context.attemptNumber() == 0 and context.partitionId() == subtask


class FailsAfterFlush(FileSink):
    """A FileSink whose first attempt of subtask 0 dies right after flushing its file."""

    def finish(self, transaction: Any) -> None:
        super().finish(transaction)
        files = [f["staging"] for f in transaction.files]
        if first_attempt_of(0) and files and all(os.path.exists(f) for f in files):
            raise injected("sink-died-after-flush")


def fails_after_emitting(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Upstream map: the first attempt of subtask 1 fails on its third batch."""
    global _seen
    _seen = globals().get("_seen", 0) + 1
    if _seen == 3 and first_attempt_of(1):
        raise injected("upstream-died-after-emitting")
    return batch


def run(spark: Any, base: str, name: str, sink: FileSink, upstream_fails: bool) -> dict[str, Any]:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    rows = [{"k": i % 13, "v": i} for i in range(3000)]
    stream = env.from_collection(rows, batch_size=200)
    if upstream_fails:
        stream = stream.map_batch(fails_after_emitting, name="flaky")
    stream.key_by("k").map(lambda r: r, name="keyed").sink_to(sink)
    env.execute(name)
    table = ds.dataset(sink.path, format="parquet").to_table()
    staging = [str(p) for p in Path(sink.path).glob("_staging-*/*")]
    return {"v": sorted(table.column("v").to_pylist()), "leftover_staging": staging}


def main(base: str) -> None:
    os.environ["FLINTLOCK_TEST_MARKERS"] = base
    spark = start_session("local[2,4]")
    results = {
        "sink_fails": run(
            spark, f"{base}/a", "sink-fails", FailsAfterFlush(f"{base}/a/out"), False
        ),
        "upstream_fails": run(
            spark, f"{base}/b", "upstream-fails", FileSink(f"{base}/b/out"), True
        ),
    }
    spark.stop()
    results["markers"] = sorted(n for n in os.listdir(base) if "died" in n)
    print_result(results)


if __name__ == "__main__":
    main(sys.argv[1])
