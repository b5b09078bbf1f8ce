"""Run by test_local_cluster.py in its own process: jobs on ``local-cluster[2,1,1024]``.

local-cluster mode starts a standalone master, a worker and two executor JVMs, each
with its own Python workers: the closest to a real cluster that runs on one machine, and
not "local" to flintlock, so ``checkpoint_dir`` is required. Prints one ``RESULT`` line.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from job_scripts import print_result, start_session

from flintlock import KeyedProcessFunction, StreamExecutionEnvironment, ValueStateDescriptor
from flintlock.errors import GraphError
from flintlock.sinks.files import FileSink
from flintlock.testing import LifecycleRecorder


class Total(KeyedProcessFunction):
    """Sums ``amount`` per user; emits the total when the input ends (event-time timer)."""

    def open(self) -> None:
        descriptor = ValueStateDescriptor("total", pa.int64(), default=0)
        self.total = self.runtime_context.get_state(descriptor)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.total.update(self.total.value() + value["amount"])
        ctx.timer_service().register_event_time_timer(2**62)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect(
            {"user": ctx.get_current_key(), "total": self.total.value(), "pid": os.getpid()}
        )


def main(base: str) -> None:
    spark = start_session("local-cluster[2,1,1024]")
    no_dir = StreamExecutionEnvironment(parallelism=2, spark=spark)
    no_dir.from_collection([{"v": 1}]).print()
    try:
        no_dir.execute("no-checkpoint-dir")
        missing_dir_error = None
    except GraphError as error:
        missing_dir_error = str(error)

    recorder = LifecycleRecorder()
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk", plugins=[recorder]
    )
    rows = [{"user": f"u{i % 5}", "amount": i} for i in range(500)]
    totals = env.from_collection(rows, batch_size=50).key_by("user").process(Total())
    totals.sink_to(FileSink(f"{base}/out"))
    result = env.execute("on-a-cluster")
    table = ds.dataset(f"{base}/out", format="parquet").to_table()
    spark.stop()
    print_result(
        {
            "missing_dir_error": missing_dir_error,
            "totals": sorted(
                zip(table["user"].to_pylist(), table["total"].to_pylist(), strict=True)
            ),
            "worker_pids": sorted(set(table["pid"].to_pylist())),
            "driver_pid": os.getpid(),
            "final_states": {
                task: [c for c in calls if c[0] == "state"][-1][1]
                for task, calls in recorder.by_task.items()
            },
            "checkpoint": result.checkpoint_id,
        }
    )


if __name__ == "__main__":
    main(sys.argv[1])
