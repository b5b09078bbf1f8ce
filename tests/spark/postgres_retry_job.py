"""A PostgresSink job run with task retries (``local[2,4]``) in its own process: the first
attempt of subtask 0 dies right after committing its staged rows (the keys of the retry's
rows); the retry must neither wait on them nor write a row twice. Prints JSON results.

Run by tests/spark/test_postgres_sink.py with the test server's conninfo in
``FLINTLOCK_TEST_POSTGRES``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import psycopg
import retry_jobs
from job_scripts import print_result, start_session
from pyspark import cloudpickle
from retry_jobs import first_attempt_of, injected

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.postgres import PostgresSink

cloudpickle.register_pickle_by_value(retry_jobs)  # workers cannot import tests/


class PreparesThenDies(PostgresSink):
    """A PostgresSink whose first attempt of subtask 0 is killed once its rows are staged:
    its Python worker exits, no ``abort`` runs, its staging table stays until the driver
    drops it."""

    def pre_commit(self, transaction: Any) -> list[Any]:
        committables = super().pre_commit(transaction)
        if first_attempt_of(0) and committables:
            injected("sink-died-after-prepare")
            os._exit(1)
        return committables


def main(base: str) -> None:
    os.environ["FLINTLOCK_TEST_MARKERS"] = base
    conninfo = os.environ["FLINTLOCK_TEST_POSTGRES"]
    with psycopg.connect(conninfo) as connection:  # a retry's rows meet the dead attempt's keys
        connection.execute("CREATE TABLE retried (k bigint, v bigint PRIMARY KEY)")
    spark = start_session("local[2,4]")
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    rows = [{"k": i % 13, "v": i} for i in range(3000)]
    sink = PreparesThenDies(conninfo, "retried", lock_timeout="5s")
    env.from_collection(rows, batch_size=200).key_by("k").sink_to(sink)
    env.execute("postgres-retries")
    spark.stop()
    with psycopg.connect(conninfo) as connection:
        values = [v for (v,) in connection.execute("SELECT v FROM retried ORDER BY v")]
        left = [gid for (gid,) in connection.execute("SELECT gid FROM pg_prepared_xacts")]
    markers = sorted(name for name in os.listdir(base) if "died" in name)
    print_result({"v": values, "prepared": left, "markers": markers})


if __name__ == "__main__":
    main(sys.argv[1])
