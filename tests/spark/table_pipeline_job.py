"""The second job of the table-to-table pipeline test: an unbounded ``from_delta`` of the
Delta table the first job wrote, into PostgreSQL (``copied``), in its own process so that
its driver can be SIGKILLed inside the commit of its first checkpoint: after the first of
the checkpoint's prepared transactions was committed, before the second.

``python table_pipeline_job.py BASE`` with the conninfo in ``FLINTLOCK_TEST_POSTGRES``.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.sinks.postgres import PostgresSink


class KilledInItsFirstCommit(PostgresSink):
    """Commits one prepared transaction of its first checkpoint, then kills the driver
    (once: a marker file in ``base``)."""

    def __init__(self, conninfo: str, table: str, marker: str) -> None:
        super().__init__(conninfo, table)
        self.marker = marker

    def commit(self, context: Any, committables: list[Any]) -> None:
        if len(committables) > 1 and not os.path.exists(self.marker):
            super().commit(context, committables[:1])
            with open(self.marker, "w") as marker:
                marker.write(f"killed in the commit of checkpoint {context.checkpoint_id}")
            os.kill(os.getpid(), signal.SIGKILL)
        super().commit(context, committables)


def copy_job(spark: Any, base: str, conninfo: str) -> StreamExecutionEnvironment:
    """from_delta(<base>/orders, unbounded) -> PostgresSink(copied), parallelism 2."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    stream = env.from_delta(f"{base}/orders", unbounded=True)
    stream.sink_to(KilledInItsFirstCommit(conninfo, "copied", f"{base}/killed"), name="copied")
    return env


if __name__ == "__main__":
    from job_scripts import start_session

    base = sys.argv[1]
    env = copy_job(start_session("local[2]"), base, os.environ["FLINTLOCK_TEST_POSTGRES"])
    env.execute("copy-orders", trigger=EpochTrigger.available_now())
    print("RESULT not killed")
