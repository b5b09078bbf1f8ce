"""Kafka to Kafka and Delta, unbounded and exactly once: orders per customer and 10 s window.

Orders arrive in a Kafka topic as JSON values (``{"id": 7, "customer": "c1", "amount":
3}``); their event time is the record's timestamp. The job keys them by customer, sums
and counts them per 10-second event-time window (the window operator keeps the open
windows as keyed state and fires each once the watermark passes its end), adds a running
total per customer (keyed ``ValueState``), and writes each fired window once to a Kafka
topic (key = customer, JSON value; read it ``read_committed``) and to a Delta table.
Offsets, open windows and totals are in every checkpoint, so a restart, a savepoint or a
restore at another parallelism goes on exactly where the job stopped.

Run it against a broker (both topics created beforehand, e.g. with kafka-topics.sh)::

    pip install 'flintlock[kafka,delta]'
    export KAFKA_BOOTSTRAP=broker:9092
    python examples/kafka_orders_job.py --orders orders --totals order-totals \\
        --table /data/order_totals --checkpoints /data/checkpoints --trigger 5

``--trigger N`` starts an epoch every N seconds until ``Ctrl-C`` (a stop with a
savepoint); ``--trigger available-now`` (the default) reads what is there and stops.
Watermarks are per partition (the source's is the minimum over its partitions), each
trailing the highest timestamp read from its partition by ``--out-of-orderness`` ms: an
order later than that (against the orders of its own partition before it) is dropped by
its window, as in Flink.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from flintlock import (
    DataStream,
    DeltaSink,
    EpochTrigger,
    JobExecutionResult,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from flintlock.sinks.kafka import KafkaSink

JOB_NAME = "kafka-orders"
WINDOW_MS = 10_000
ORDER = pa.schema([("id", pa.int64()), ("customer", pa.string()), ("amount", pa.int64())])
TOTALS = pa.schema(
    [
        ("customer", pa.string()),
        ("window_start", pa.int64()),  # ms since the epoch, as window_end
        ("window_end", pa.int64()),
        ("orders", pa.int64()),
        ("amount", pa.int64()),
        ("running_total", pa.int64()),  # the customer's amount over every window so far
    ]
)


def read_orders(
    env: StreamExecutionEnvironment, bootstrap: str, topic: str, out_of_orderness: int
) -> DataStream:
    """The orders topic as rows ``id, customer, amount, timestamp`` (the record's)."""
    records = env.from_kafka(
        bootstrap,
        topics=[topic],
        value_format="json",
        schema=ORDER,
        watermark_strategy=WatermarkStrategy("timestamp", out_of_orderness),
        name="orders",
    )
    return records.map_batch(flatten, name="flatten")


def flatten(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The JSON value's fields as columns, beside the record timestamp (the event time)."""
    value = batch.column("value")
    columns = [value.field(name) for name in ORDER.names] + [batch.column("timestamp")]
    return pa.RecordBatch.from_arrays(columns, names=[*ORDER.names, "timestamp"])


class RunningTotal(KeyedProcessFunction):
    """Adds each fired window's amount to the customer's total so far (keyed state)."""

    output_schema = TOTALS

    def open(self) -> None:
        self.total = self.runtime_context.get_state(
            ValueStateDescriptor("total", pa.int64(), default=0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        total = self.total.value() + value["amount"]
        self.total.update(total)
        out.collect({**value, "running_total": total})


def windows_per_customer(orders: DataStream) -> DataStream:
    """Orders and amount per customer and 10 s event-time window, with running totals."""
    windows = (
        orders.key_by("customer")
        .window(TumblingEventTimeWindows.of(WINDOW_MS))
        .aggregate_columns(
            {"orders": ("id", "count"), "amount": ("amount", "sum")}, name="window_totals"
        )
    )
    return windows.key_by("customer").process(RunningTotal(), name="running_total")


def write(totals: DataStream, kafka: KafkaSink, delta: DeltaSink) -> None:
    """Each fired window to both outputs (sink names fix their transactions' ids)."""
    totals.sink_to(kafka, name="totals-to-kafka")
    totals.sink_to(delta, name="totals-to-delta")


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The job's settings, from ``argv`` or the environment (``KAFKA_BOOTSTRAP``...)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ.get
    parser.add_argument("--bootstrap", default=env("KAFKA_BOOTSTRAP", "localhost:9092"))
    parser.add_argument("--orders", default=env("ORDERS_TOPIC", "orders"))
    parser.add_argument("--totals", default=env("TOTALS_TOPIC", "order-totals"))
    parser.add_argument("--table", default=env("TOTALS_TABLE", "order_totals"))
    parser.add_argument("--checkpoints", default=env("CHECKPOINT_DIR", "checkpoints"))
    parser.add_argument("--parallelism", type=int, default=int(env("PARALLELISM", "2")))
    parser.add_argument("--trigger", default=env("TRIGGER", "available-now"))
    parser.add_argument("--out-of-orderness", type=int, default=5_000, help="ms")
    parser.add_argument("--restore-from", default=None, help="a savepoint or checkpoint")
    return parser.parse_args(argv)


def trigger(setting: str) -> EpochTrigger:
    """``available-now``, or an epoch every N seconds."""
    if setting == "available-now":
        return EpochTrigger.available_now()
    return EpochTrigger.processing_time(float(setting))


def build(settings: argparse.Namespace, spark: Any = None) -> StreamExecutionEnvironment:
    """The whole job on a new environment (``spark``: a session to run on, else its own)."""
    env = StreamExecutionEnvironment(
        parallelism=settings.parallelism, checkpoint_dir=settings.checkpoints, spark=spark
    )
    orders = read_orders(env, settings.bootstrap, settings.orders, settings.out_of_orderness)
    kafka = KafkaSink(settings.totals, settings.bootstrap, key="customer")
    write(windows_per_customer(orders), kafka, DeltaSink(settings.table))
    return env


def main(argv: Sequence[str] | None = None, spark: Any = None) -> JobExecutionResult:
    """Run the job until its trigger stops it (or ``Ctrl-C``: a stop with a savepoint)."""
    settings = arguments(argv)
    env = build(settings, spark)
    result = env.execute(
        JOB_NAME, trigger=trigger(settings.trigger), restore_from=settings.restore_from
    )
    print(f"{JOB_NAME}: {result.status} after {result.epochs} epochs")
    return result


if __name__ == "__main__":
    main()
