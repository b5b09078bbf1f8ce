"""Run by test_spark_submit.py through the ``spark-submit`` script of the pyspark wheel:
a job file as the README has users write it, building only a StreamExecutionEnvironment.
With an argument (a folder) it gives ``checkpoint_dir``; without one it gives none.
Prints one ``SESSION`` line (what Spark ran it on) and one ``DONE`` line."""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession

from flintlock import StreamExecutionEnvironment


def report(figures: Any) -> None:
    """What the session running the job is, read while it runs."""
    spark = SparkSession.getActiveSession()
    assert spark is not None
    context = spark.sparkContext
    session = {
        "master": context.master,
        "default_parallelism": context.defaultParallelism,
        "app_name": context.appName,
    }
    print("SESSION " + json.dumps(session), flush=True)


checkpoint_dir = sys.argv[1] if len(sys.argv) > 1 else None
env = StreamExecutionEnvironment(parallelism=2, checkpoint_dir=checkpoint_dir)
env.from_collection([{"v": i} for i in range(6)]).print()
result = env.execute("submitted", progress=report)
print("DONE " + json.dumps(result.job_name), flush=True)
