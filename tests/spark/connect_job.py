"""W1 over Spark Connect (``remote("local[2]")``), in its own process; prints JSON.

A Connect session cannot share a process with the suite's classic session.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import w1
from pyspark import cloudpickle
from w1 import flintlock_w1, w1_input

cloudpickle.register_pickle_by_value(w1)  # workers cannot import examples/w1.py


def main(checkpoint_dir: str, n: int) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    assert spark.is_connect if hasattr(spark, "is_connect") else "connect" in type(spark).__module__
    frame = w1_input(spark, n)
    results = {
        "session": type(spark).__module__,
        "batch": flintlock_w1(spark, frame, 2, False, checkpoint_dir + "/batch"),
        "record": flintlock_w1(spark, frame, 2, True, checkpoint_dir + "/record"),
    }
    spark.stop()
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
