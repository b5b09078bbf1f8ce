"""The Kafka chaos suite's driver (tests/spark/test_chaos_kafka.py): runs its job with
``EpochTrigger.available_now()`` under ``local[2,4]`` (Spark retries failed tasks)
until a run has read what the input topic holds and STOPPED; prints a RESULT line.

The job: ``from_kafka`` over the input topic (JSON orders with unique ids, at most
``per_epoch`` records an epoch) -> the id and its key (``id % KEYS``) -> a keyed running
count (value state: the n-th record of its key gets count n) -> KafkaSink exactly once
(the target's output topic, tests/spark/sink_chaos_targets.py ``KafkaTarget``) and a
FileSink. Faults of the plan: at a record of the keyed count (``process``: a raise, a
killed worker, the driver killed mid-epoch), in the KafkaSink (``sink``, through
``chaos_faults.FaultySink``: write, pre_commit, its commit before or after the inner
commit), inside its Kafka transaction (``kafka``: every row at the broker, before
``commit_transaction``: a raise or the driver killed) and between epochs (``driver``).
A failed ``execute()`` (a commit fault, the broker gone) is started again in this
process; a killed driver is started again by the test on the same checkpoint folder.

Prints ``READY``, ``START <job>``, ``EPOCH ...`` per committed epoch and ``DONE <job>
<outcome>``, flushed, as tests/spark/chaos_unbounded_driver.py does (whose ``run_job``
runs the job here).
"""

from __future__ import annotations

import faulthandler
import json
import sys
from pathlib import Path
from typing import Any

import chaos_faults
import pyarrow as pa
import sink_chaos_targets
from chaos_faults import Fault, FaultsOfFunction, FaultySink
from chaos_unbounded_driver import faults_at, run_job
from job_scripts import print_result, start_session
from sink_chaos_targets import FileSinkTarget, KafkaTarget

from flintlock import EpochTrigger, KeyedProcessFunction, ValueStateDescriptor
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.kafka import KafkaSink
from flintlock.sinks.kafka_commit import TransactionalCommitter
from flintlock.sinks.kafka_records import DeliveryCounter

KEYS = 7
ORDER = pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("customer", pa.string())])
"""An input record's JSON value (tests/kafka_records.py ``order``)."""
KEYED = pa.schema(
    [("k", pa.int64()), ("id", pa.int64()), ("timestamp", pa.timestamp("ms", tz="UTC"))]
)
"""The keyed count's input: the record timestamp stays (the source's event time)."""
OUT = pa.schema([("k", pa.int64()), ("id", pa.int64()), ("count", pa.int64())])
"""What both sinks write: the key, the id and the key's running count at that record."""
HUNG_AFTER = 200.0
"""Seconds after which the driver writes every thread's stack to stderr (the test's
watchdog kills a driver after 300 s)."""
LEASE_SECONDS = 1.0
"""A killed driver's lease expires after 5 s: its successor waits less than that."""


def keyed(row: dict[str, Any]) -> dict[str, Any]:
    order_id = int(row["value"]["id"])
    return {"k": order_id % KEYS, "id": order_id, "timestamp": row["timestamp"]}


class FaultyRunningCount(FaultsOfFunction, KeyedProcessFunction):
    """Each record with its key's running count (keyed value state); the plan's faults
    fire at the n-th record of a task attempt."""

    output_schema = OUT

    def __init__(self, markers: str, faults: list[Fault]) -> None:
        self._plan(markers, faults)

    def open(self) -> None:
        descriptor = ValueStateDescriptor("count", pa.int64(), default=0)
        self.count = self.runtime_context.get_state(descriptor)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self._record()
        self.count.update(self.count.value() + 1)
        out.collect({"k": value["k"], "id": value["id"], "count": self.count.value()})


class FaultyTransactions(TransactionalCommitter):
    """The driver's committer with faults inside the open transaction: every row of the
    checkpoint at the broker, before the marker and ``commit_transaction``."""

    timeout, grace = 30.0, 10.0  # a step blocked by a killed broker fails after 40 s, not 90

    markers = ""
    faults: list[Fault] = []

    def before_commit(self, context: Any, counter: DeliveryCounter) -> None:
        super().before_commit(context, counter)
        for fault in self.faults:
            if fault.due(fault.kind, 1, context.checkpoint_id):
                chaos_faults.fire(self.markers, fault)


class KafkaSinkWithTransactionFaults(KafkaSink):
    """KafkaSink whose committer is ``FaultyTransactions`` with ``faults``."""

    committer_type = FaultyTransactions

    def __init__(self, topic: str, bootstrap: str, markers: str, faults: list[Fault]) -> None:
        super().__init__(topic, bootstrap)
        self.markers = markers
        self.faults = faults

    def committer(self, who: str) -> TransactionalCommitter:
        committer = super().committer(who)
        assert isinstance(committer, FaultyTransactions)
        committer.markers, committer.faults = self.markers, self.faults
        return committer


def build(spark: Any, base: Path, job: dict[str, Any]) -> StreamExecutionEnvironment:
    """The job of the module's docstring, with the plan's faults."""
    markers = str(base / "markers")
    kafka = KafkaTarget(base).settings
    env = StreamExecutionEnvironment(
        parallelism=job["parallelism"],
        spark=spark,
        checkpoint_dir=f"{base}/chk",
        lease_seconds=LEASE_SECONDS,
    )
    orders = env.from_kafka(
        kafka["bootstrap"],
        topics=[job["input"]],
        value_format="json",
        schema=ORDER,
        max_records_per_epoch=job["per_epoch"],
    )
    ids = orders.map(keyed, name="chaos-keyed", output_schema=KEYED)
    count = FaultyRunningCount(markers, faults_at(job, "process"))
    counted = ids.key_by(lambda row: row["k"]).process(count, name="chaos-count")
    inner = KafkaSinkWithTransactionFaults(
        kafka["topic"], kafka["bootstrap"], markers, faults_at(job, "kafka")
    )
    counted.sink_to(FaultySink(inner, markers, faults_at(job, "sink")), name="kafka")
    counted.sink_to(FileSinkTarget(base).make_sink(), name="files")
    return env


def main(plan_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text())
    job = plan["jobs"][0]
    base = Path(job["folder"])
    (base / "markers").mkdir(parents=True, exist_ok=True)
    from pyspark import cloudpickle

    for module in (chaos_faults, sink_chaos_targets):
        cloudpickle.register_pickle_by_value(module)  # workers cannot import tests/
    faulthandler.dump_traceback_later(HUNG_AFTER)  # a hung driver's stacks, in its stderr
    spark = start_session("local[2,4]")
    print("READY", flush=True)
    print(f"START {job['name']}", flush=True)
    outcome = run_job(spark, base, job, build=build, trigger=EpochTrigger.available_now())
    print(f"DONE {job['name']} {outcome['outcome']}", flush=True)
    spark.stop()
    print_result(outcome)


if __name__ == "__main__":
    main(sys.argv[1])
