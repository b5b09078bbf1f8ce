"""The Structured Streaming job the epoch tests run: Parquet files arriving in a folder
(one file per micro-batch) -> keyed running sum -> FileSink.

``python streaming_jobs.py BASE KILL_AFTER``: runs it with its driver SIGKILLed right
after epoch KILL_AFTER committed (before Spark records the micro-batch as done), once.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flintlock import KeyedProcessFunction, ValueStateDescriptor
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.files import FileSink

FILES, ROWS_PER_FILE, KEYS = 5, 200, 3
OUT = pa.schema([("k", pa.int64()), ("id", pa.int64()), ("total", pa.int64())])


class RunningSum(KeyedProcessFunction):
    """Each row with its key's running sum of ids."""

    output_schema = OUT

    def open(self) -> None:
        self.total = self.runtime_context.get_state(
            ValueStateDescriptor("total", pa.int64(), default=0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.total.update(self.total.value() + value["id"])
        out.collect({"k": value["id"] % KEYS, "id": value["id"], "total": self.total.value()})


def write_input(base: str) -> None:
    """FILES Parquet files of ROWS_PER_FILE consecutive ids each."""
    os.makedirs(f"{base}/in", exist_ok=True)
    for number in range(FILES):
        ids = list(range(number * ROWS_PER_FILE, (number + 1) * ROWS_PER_FILE))
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64())}), f"{base}/in/{number:03d}.parquet"
        )


def build(spark: Any, base: str) -> StreamExecutionEnvironment:
    """The job over the folder's files, one file per micro-batch."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    frame = spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).parquet(f"{base}/in")
    stream = env.from_stream(frame)
    stream.key_by(lambda row: row["id"] % KEYS).process(RunningSum()).sink_to(
        FileSink(f"{base}/out"), name="files"
    )
    return env


if __name__ == "__main__":
    from job_scripts import start_session
    from pyspark import cloudpickle
    from unbounded_jobs import killed_after

    from flintlock.core.api.triggers import EpochTrigger

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import it
    base, kill_after = sys.argv[1], int(sys.argv[2])
    build(start_session("local[2]"), base).execute(
        "stream", trigger=EpochTrigger.available_now(), progress=killed_after(kill_after)
    )
    print("RESULT not killed")
