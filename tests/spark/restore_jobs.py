"""The keyed running-sum job the restore tests run, in the test process and in a process
whose driver is SIGKILLed (``python restore_jobs.py BASE``: killed once the final
checkpoint completed, before its commit)."""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa
from job_scripts import start_session
from killed_driver_job import DyingFileSink

from flintlock import KeyedProcessFunction, ValueStateDescriptor
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.files import FileSink

N = 3000
ROWS = [{"k": i * 7 % 41, "v": i} for i in range(N)]
OUT = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("total", pa.int64())])


class RunningSum(KeyedProcessFunction):
    """Emits each row with the running sum of ``v`` of its key (ValueState 'total')."""

    output_schema = OUT

    def open(self) -> None:
        descriptor = ValueStateDescriptor("total", pa.int64(), default=0)
        self.total = self.runtime_context.get_state(descriptor)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.total.update(self.total.value() + value["v"])
        out.collect({"k": value["k"], "v": value["v"], "total": self.total.value()})


def running_sums(rows: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """The uninterrupted run, in plain Python: (k, v, running total) per row, sorted."""
    totals: dict[int, int] = {}
    out = []
    for row in rows:
        totals[row["k"]] = totals.get(row["k"], 0) + row["v"]
        out.append((row["k"], row["v"], totals[row["k"]]))
    return sorted(out)


def final_totals(rows: list[dict[str, Any]]) -> dict[int, int]:
    """Each key's last running sum: the state the job holds at its end."""
    totals: dict[int, int] = {}
    for row in rows:
        totals[row["k"]] = totals.get(row["k"], 0) + row["v"]
    return totals


def collected(result: Any) -> list[tuple[int, int, int]]:
    """The collect sink's rows of a run's result: (k, v, running total), in output order."""
    table = result.collected["out"]
    return list(zip(*(table.column(c).to_pylist() for c in ("k", "v", "total")), strict=True))


def build(
    spark: Any,
    base: str,
    rows: list[dict[str, Any]],
    parallelism: int,
    source_uid: str,
    sink: FileSink | CollectSink,
    **env_options: Any,
) -> StreamExecutionEnvironment:
    """One source subtask (rows keep their order per key) -> key_by -> running sums."""
    env = StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=f"{base}/chk", **env_options
    )
    (
        env.from_collection(rows, batch_size=250)
        .set_parallelism(1)
        .uid(source_uid)
        .key_by("k")
        .process(RunningSum(), name="sums")
        .sink_to(sink, name="out")
    )
    return env


if __name__ == "__main__":
    import killed_driver_job
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(killed_driver_job)  # workers cannot import tests
    base = sys.argv[1]
    spark = start_session("local[2]")
    sink = DyingFileSink(f"{base}/out", base, "before-commit")
    build(spark, base, ROWS[: N // 2], 2, "input-1", sink).execute("sums")
    print("RESULT not killed")
