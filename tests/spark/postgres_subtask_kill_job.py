"""A PostgresSink job with ``visibility="subtask"`` in its own process: the first driver
is killed between two COMMIT PREPARED of checkpoint 2 (one subtask's rows visible, the
other's still prepared); run again on the same job and checkpoint folder, the next driver
must commit the rest and finish the job, every row once. Prints JSON results.

Run by tests/spark/test_postgres_sink.py with the test server's conninfo in
``FLINTLOCK_TEST_POSTGRES``: ``postgres_subtask_kill_job.py BASE``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import psycopg
from job_scripts import print_result, start_session

from flintlock import EpochTrigger
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.postgres import PostgresSink

PER_EPOCH, EPOCHS = 400, 4


class DiesBetweenSubtaskCommits(PostgresSink):
    """Kills its driver (SIGKILL-like: no cleanup) right after the first COMMIT PREPARED
    of checkpoint 2, once (a marker file in the job's base folder)."""

    def __init__(self, conninfo: str, marker: str) -> None:
        super().__init__(conninfo, "out", visibility="subtask")
        self.marker = marker
        self.checkpoint = 0

    def commit(self, context: Any, committables: list[Any]) -> None:
        self.checkpoint = context.checkpoint_id
        super().commit(context, committables)

    def _commit_prepared(self, connection: Any, xid: Any) -> None:
        super()._commit_prepared(connection, xid)
        if self.checkpoint == 2 and not os.path.exists(self.marker):
            Path(self.marker).write_text("killed between subtask commits\n")
            os._exit(9)


def main(base: str) -> None:
    conninfo = os.environ["FLINTLOCK_TEST_POSTGRES"]
    spark = start_session("local[2]")
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk", lease_seconds=0.2
    )
    sink = DiesBetweenSubtaskCommits(conninfo, f"{base}/killed")
    env.from_sequence(end=PER_EPOCH * EPOCHS, rows_per_epoch=PER_EPOCH).sink_to(sink)
    result = env.execute("subtask-visibility", trigger=EpochTrigger.available_now())
    spark.stop()
    with psycopg.connect(conninfo) as connection:
        ids = [i for (i,) in connection.execute("SELECT id FROM out ORDER BY id")]
        left = [gid for (gid,) in connection.execute("SELECT gid FROM pg_prepared_xacts")]
    print_result({"status": result.status, "ids": ids, "prepared": left})


if __name__ == "__main__":
    main(sys.argv[1])
