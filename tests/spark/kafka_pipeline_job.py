"""examples/kafka_orders_job.py in its own process, whose first driver dies (``os._exit``:
no cleanup) inside the KafkaSink commit of the run's first checkpoint, with that
checkpoint's windows sent in its Kafka transaction and the transaction not committed,
once (a marker file in the base folder). Run again on the same folders, the next driver
completes the commit and goes on. Prints the status.

Run by tests/spark/test_kafka_pipeline.py:
``kafka_pipeline_job.py BASE BOOTSTRAP ORDERS_TOPIC TOTALS_TOPIC``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from job_scripts import print_result, start_session

from flintlock import DeltaSink, StreamExecutionEnvironment
from flintlock.sinks.kafka import KafkaSink
from flintlock.sinks.kafka_commit import TransactionalCommitter
from flintlock.sinks.kafka_records import DeliveryCounter

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kafka_orders_job.py"


def load_example() -> ModuleType:
    """Import examples/kafka_orders_job.py; its functions travel to workers by value."""
    if EXAMPLE.stem not in sys.modules:
        spec = importlib.util.spec_from_file_location(EXAMPLE.stem, EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[EXAMPLE.stem] = module
        spec.loader.exec_module(module)
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    return sys.modules[EXAMPLE.stem]


class DiesBeforeCommitTransaction(TransactionalCommitter):
    """Dies once every window of the first commit is at the broker, uncommitted."""

    marker = ""

    def before_commit(self, context: Any, counter: DeliveryCounter) -> None:
        super().before_commit(context, counter)
        if not os.path.exists(self.marker):
            Path(self.marker).write_text(f"killed in the commit of {context.checkpoint_id}\n")
            os._exit(9)


class DiesInsideTheCommit(KafkaSink):
    """The example's KafkaSink, whose driver dies inside its first commit (once)."""

    committer_type = DiesBeforeCommitTransaction


def main(base: str, bootstrap: str, orders_topic: str, totals_topic: str) -> None:
    example = load_example()
    spark = start_session("local[2]")
    settings = example.arguments(
        [
            *("--bootstrap", bootstrap, "--orders", orders_topic, "--totals", totals_topic),
            *("--table", f"{base}/totals", "--checkpoints", f"{base}/chk"),
            *("--out-of-orderness", "0"),
        ]
    )
    DiesBeforeCommitTransaction.marker = f"{base}/killed"  # the committer runs here
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=settings.checkpoints, lease_seconds=0.2
    )
    orders = example.read_orders(env, bootstrap, orders_topic, settings.out_of_orderness)
    kafka = DiesInsideTheCommit(totals_topic, bootstrap, key="customer")
    example.write(example.windows_per_customer(orders), kafka, DeltaSink(settings.table))
    result = env.execute(example.JOB_NAME, trigger=example.trigger(settings.trigger))
    spark.stop()
    print_result({"status": result.status})


if __name__ == "__main__":
    main(*sys.argv[1:5])
