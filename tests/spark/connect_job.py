"""W1 over Spark Connect, in its own process; prints JSON.

``connect_job.py BASE N``: per batch and per record, on ``remote("local[2]")`` (a local
Connect server pyspark starts). ``connect_job.py BASE N sc://HOST:PORT``: per batch, on
a Connect server of its own (the tests start one on the standalone cluster), with
where each subtask ran (the job's metrics). A Connect session cannot share a process
with the suite's classic session.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import w1
from pyspark import cloudpickle
from w1 import CountSum, double_value, even_key, flintlock_w1, w1_input

from flintlock import StreamExecutionEnvironment

cloudpickle.register_pickle_by_value(w1)  # workers cannot import examples/w1.py


def w1_and_where(spark: Any, frame: Any, checkpoint_dir: str) -> dict[str, Any]:
    """W1 per batch, its (count, sum) and the executor each subtask ran in."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=checkpoint_dir)
    stream = env.from_dataframe(frame).map_batch(double_value).filter_batch(even_key)
    rows = stream.transform("count_sum", CountSum).collect_async()
    result = env.execute("w1-over-connect")
    table = rows.table()
    where = [
        {"task": task, "subtask": index, **sub["executor"]}
        for epoch in result.metrics["epochs"]
        for task, vertex in epoch["vertices"].items()
        for index, sub in vertex["subtasks"].items()
    ]
    counted = [sum(table.column("count").to_pylist()), sum(table.column("sum").to_pylist())]
    return {"batch": counted, "where": where, "client_pid": os.getpid()}


def main(checkpoint_dir: str, n: int, remote: str = "local[2]") -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(remote).getOrCreate()
    assert spark.is_connect if hasattr(spark, "is_connect") else "connect" in type(spark).__module__
    frame = w1_input(spark, n)
    results: dict[str, Any] = {"session": type(spark).__module__}
    if remote.startswith("sc://"):
        results.update(w1_and_where(spark, frame, checkpoint_dir))
    else:
        results["batch"] = flintlock_w1(spark, frame, 2, False, checkpoint_dir + "/batch")
        results["record"] = flintlock_w1(spark, frame, 2, True, checkpoint_dir + "/record")
    spark.stop()
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:])
