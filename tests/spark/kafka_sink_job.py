"""A KafkaSink job in its own process, whose first driver dies (``os._exit``: no cleanup)
inside the commit of checkpoint 2, once (a marker file in the job's base folder):
exactly once, with checkpoint 2's rows sent in its Kafka transaction and the transaction
not committed; at least once, after its tasks flushed checkpoint 2's rows. Run again on
the same job and checkpoint folder, the next driver finishes the job. Prints the status.

Run by tests/spark/test_kafka_sink_on_spark.py: ``kafka_sink_job.py BASE BOOTSTRAP TOPIC DELIVERY``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from job_scripts import print_result, start_session

from flintlock import EpochTrigger
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.kafka import KafkaSink
from flintlock.sinks.kafka_commit import TransactionalCommitter
from flintlock.sinks.kafka_records import DeliveryCounter

PER_EPOCH, EPOCHS = 300, 3
KILLED_AT = 2


def die_once(marker: str) -> None:
    if not os.path.exists(marker):
        Path(marker).write_text(f"killed in the commit of checkpoint {KILLED_AT}\n")
        os._exit(9)


class DiesBeforeCommitTransaction(TransactionalCommitter):
    """Dies once every row of checkpoint 2 is at the broker, in its open transaction."""

    marker = ""

    def before_commit(self, context: Any, counter: DeliveryCounter) -> None:
        super().before_commit(context, counter)
        if context.checkpoint_id == KILLED_AT:
            die_once(self.marker)


class DiesInsideTheCommit(KafkaSink):
    """KafkaSink whose driver dies inside the commit of checkpoint 2 (once)."""

    committer_type = DiesBeforeCommitTransaction

    def commit(self, context: Any, committables: list[Any]) -> None:
        if not self.exactly_once and context.checkpoint_id == KILLED_AT:
            die_once(DiesBeforeCommitTransaction.marker)  # its tasks flushed the rows
        super().commit(context, committables)


def main(base: str, bootstrap: str, topic: str, delivery: str) -> None:
    spark = start_session("local[2]")
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk", lease_seconds=0.2
    )
    DiesBeforeCommitTransaction.marker = f"{base}/killed"  # the committer runs here
    sink = DiesInsideTheCommit(topic, bootstrap, delivery=delivery)
    env.from_sequence(end=PER_EPOCH * EPOCHS, rows_per_epoch=PER_EPOCH).sink_to(sink, name="kafka")
    result = env.execute("to-kafka", trigger=EpochTrigger.available_now())
    spark.stop()
    print_result({"status": result.status})


if __name__ == "__main__":
    main(*sys.argv[1:5])
