"""Run by test_standalone_cluster.py with ``spark-submit --master spark://...``: a job
file as README has users write it, building only a StreamExecutionEnvironment (no
SparkSession, no PYSPARK_PYTHON, no Spark settings of its own).

``standalone_job.py BASE bounded``: a collection summed per key into a FileSink.
``standalone_job.py BASE unbounded``: a sequence (``end=``) summed per key, slowly, in
epochs, writing ``BASE/marked`` at one row of its third epoch.

Prints ``EPOCH <n>`` per committed epoch, then one ``RESULT`` line: the driver's
pid and where each subtask of each epoch ran (the job's metrics).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import pyarrow as pa

from flintlock import KeyedProcessFunction, StreamExecutionEnvironment, ValueStateDescriptor
from flintlock.sinks.files import FileSink

KEYS = 3
ROWS = 60
MARKED_ID = 25
"""In the third epoch of the unbounded job (10 ids an epoch): reaching it writes
``BASE/marked`` while both keyed subtasks run."""
SCHEMA = pa.schema([("k", pa.int64()), ("id", pa.int64()), ("total", pa.int64())])


class RunningSum(KeyedProcessFunction):
    """Each row with its key's running sum; ``seconds`` a row, so an epoch lasts."""

    output_schema = SCHEMA

    def __init__(self, seconds: float = 0.0, marker: str | None = None) -> None:
        super().__init__()
        self.seconds = seconds
        self.marker = marker

    def open(self) -> None:
        self.total = self.runtime_context.get_state(
            ValueStateDescriptor("total", pa.int64(), default=0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        if self.marker is not None and value["id"] == MARKED_ID:
            with open(self.marker, "w") as marker:  # the test kills a worker now
                marker.write(str(os.getpid()))
        time.sleep(self.seconds)
        self.total.update(self.total.value() + value["id"])
        out.collect({"k": ctx.get_current_key(), "id": value["id"], "total": self.total.value()})


def announce(figures: dict[str, Any]) -> None:
    print(f"EPOCH {figures['epoch']}", flush=True)


def main(base: str, mode: str) -> None:
    env = StreamExecutionEnvironment(parallelism=2, checkpoint_dir=f"{base}/chk")
    if mode == "bounded":
        stream = env.from_collection([{"id": i} for i in range(ROWS)], batch_size=10)
        function = RunningSum()
    else:
        stream = env.from_sequence(end=ROWS, rows_per_epoch=10)
        function = RunningSum(seconds=0.3, marker=f"{base}/marked")
    summed = stream.key_by(lambda row: row["id"] % KEYS).process(function)
    summed.sink_to(FileSink(f"{base}/out"), name="files")
    result = env.execute(f"standalone-{mode}", progress=announce)
    where = [
        {"epoch": epoch["epoch"], "task": task, "subtask": index, **sub["executor"]}
        for epoch in result.metrics["epochs"]
        for task, vertex in epoch["vertices"].items()
        for index, sub in vertex["subtasks"].items()
        if "executor" in sub
    ]
    print("RESULT " + json.dumps({"driver_pid": os.getpid(), "where": where}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
