"""Kafka -> map -> Kafka (issue 35): flintlock's throughput against a plain confluent-kafka
consume -> map -> produce loop on the same broker, and end-to-end latency at a 1 s trigger.

The broker is the tests' (tests/kafka_server.py: Kafka 4.3.1, KRaft, one node, loopback).
``--records`` small JSON values (about 75 bytes, no key) are produced once into an input
topic of 2 partitions. The map upper-cases the value (bytes in, bytes out): the plain
loop with ``bytes.upper`` per record, flintlock with ``pyarrow.compute.utf8_upper`` per
batch (``map_batch``). Every run writes to a new 2-partition output topic.

Throughput, medians of ``--runs`` interleaved runs after a flintlock warm-up job:

- ``plain AL`` / ``plain EO``: two processes (one input partition each) consume in
  batches of 10,000, map and produce with KafkaSink's producer settings (idempotent,
  ``kafka_records.PRODUCER_DEFAULTS``); at least once flushes at the end, exactly once is
  transactional consume-transform-produce with ``send_offsets_to_transaction`` and a
  commit every ``--commit-seconds``. Timed from the moment both processes start making
  their clients to the last one's end (flush or last commit); the processes are spawned
  before.
- ``flintlock AL`` / ``flintlock EO``: ``from_kafka(bounded=True)`` -> ``map_batch`` ->
  ``KafkaSink`` at parallelism 2 on ``local[2]``, ``delivery`` at-least-once / exactly-once.
  Timed: ``env.execute`` from call to return (planning, the Spark job, its tasks'
  consumers and producers, the checkpoint, the commit: for exactly once the driver's
  one transaction of every row); the JVM and Spark session start are not included.

Each output topic's committed record count is checked in the last round.

Latency (``--latency-seconds`` at ``--rate`` records/s): a probe process sends records
stamped with their send time and reads the output read_committed; a record's latency is
its arrival minus its send time. flintlock runs an unbounded ``from_kafka`` job at
``EpochTrigger.processing_time(1.0)``; the plain loops run as above, exactly once
committing every ``--commit-seconds`` (1 s: the reference for the trigger).

    python bench/kafka.py [--records 1000000] [--runs 3] [--latency-seconds 20]
                          [--rate 1000] [--skip throughput|latency]
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import kafka_plain
import pyarrow as pa
import pyarrow.compute as pc
from kafka_server import KafkaBroker, start_broker
from timing import local_session

OUTPUT = pa.schema([("key", pa.binary()), ("value", pa.binary())])
SPAWN = multiprocessing.get_context("spawn")
PLAIN_SINK_DEFAULTS = [True]
"""Whether the plain loops' producers have KafkaSink's defaults (``--plain-producer``)."""


def upper_values(batch: pa.RecordBatch) -> pa.RecordBatch:
    """flintlock's map: key and the upper-cased value, vectorised."""
    value = pc.utf8_upper(batch.column("value").cast(pa.string())).cast(pa.binary())
    return pa.RecordBatch.from_arrays([batch.column("key"), value], schema=OUTPUT)


def fill(broker: KafkaBroker, topic: str, records: int) -> None:
    """``records`` JSON values, alternately into partitions 0 and 1."""
    from confluent_kafka import Producer

    producer = Producer(broker.config(linger_ms=20, batch_size=1_000_000))
    for i in range(records):
        value = b'{"id":%d,"user":"user-%d","amount":%d.%02d,"kind":"purchase"}' % (
            i,
            i % 5000,
            i % 997,
            i % 100,
        )
        while True:
            try:
                producer.produce(topic, value, partition=i % 2)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def count_committed(broker: KafkaBroker, topic: str) -> int:
    """Records a read_committed consumer reads from ``topic`` (markers not counted)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        broker.config(
            group_id=f"count-{uuid.uuid4().hex[:8]}",
            isolation_level="read_committed",
            enable_partition_eof=True,
            enable_auto_commit=False,
        )
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    ended: set[int] = set()
    found = 0
    while len(ended) < len(partitions):
        for message in consumer.consume(10_000, 1.0):
            error = message.error()
            if error is None:
                found += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition())
            else:
                raise RuntimeError(f"counting {topic}: {error}")
    consumer.close()
    return found


def plain(
    broker: KafkaBroker,
    source: str,
    records: int | None,
    exactly_once: bool,
    commit_seconds: float,
    stop: Any = None,
) -> tuple[Callable[[], float], str]:
    """Start the two plain-loop processes; the returned call waits for them and gives
    their seconds. Also the output topic."""
    target = broker.create_topic(f"plain-{uuid.uuid4().hex[:8]}", 2)
    barrier, results = SPAWN.Barrier(3), SPAWN.Queue()
    stop = stop if stop is not None else SPAWN.Event()
    ends = [None, None] if records is None else [(records + 1) // 2, records // 2]
    processes = [
        SPAWN.Process(
            target=kafka_plain.plain_loop,
            args=(
                broker.bootstrap,
                source,
                p,
                target,
                ends[p],
                exactly_once,
                commit_seconds,
                PLAIN_SINK_DEFAULTS[0],
                barrier,
                stop,
                results,
            ),
        )
        for p in (0, 1)
    ]
    for process in processes:
        process.start()
    barrier.wait()

    def wait() -> float:
        done = [results.get(timeout=600) for _ in processes]
        for process in processes:
            process.join()
            if process.exitcode != 0:
                raise RuntimeError(f"a plain loop exited with {process.exitcode}")
        return max(end for _, end, _ in done) - min(start for start, _, _ in done)

    return wait, target


def flintlock_job(
    spark: Any, broker: KafkaBroker, scratch: str, source: str, delivery: str, bounded: bool = True
) -> tuple[Any, str]:
    """The flintlock job's environment (not run) and its output topic."""
    from flintlock import StreamExecutionEnvironment
    from flintlock.sinks.kafka import KafkaSink

    target = broker.create_topic(f"flintlock-{uuid.uuid4().hex[:8]}", 2)
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{scratch}/chk")
    stream = env.from_kafka(broker.bootstrap, topics=[source], bounded=bounded)
    stream.map_batch(upper_values, output_schema=OUTPUT).sink_to(
        KafkaSink(target, broker.bootstrap, key="key", value="value", delivery=delivery)
    )
    return env, target


def throughput(spark: Any, broker: KafkaBroker, scratch: str, args: Any) -> None:
    source = broker.create_topic(f"input-{uuid.uuid4().hex[:8]}", 2)
    started = time.perf_counter()
    fill(broker, source, args.records)
    print(f"{args.records:,} records in {source} ({time.perf_counter() - started:.1f} s)")
    warm = broker.create_topic(f"warm-{uuid.uuid4().hex[:8]}", 2)
    fill(broker, warm, 20_000)
    for delivery in ("at-least-once", "exactly-once"):
        env, _ = flintlock_job(spark, broker, scratch, warm, delivery)
        env.execute(f"warm-{uuid.uuid4().hex[:8]}")
    seconds: dict[str, list[float]] = {}
    for run in range(args.runs):
        outputs = {}
        for mode, delivery in (("AL", "at-least-once"), ("EO", "exactly-once")):
            wait, outputs[f"plain {mode}"] = plain(
                broker, source, args.records, mode == "EO", args.commit_seconds
            )
            seconds.setdefault(f"plain {mode}", []).append(wait())
            env, outputs[f"flintlock {mode}"] = flintlock_job(
                spark, broker, scratch, source, delivery
            )
            began = time.perf_counter()
            result = env.execute(f"bench-{uuid.uuid4().hex[:8]}")
            seconds.setdefault(f"flintlock {mode}", []).append(time.perf_counter() - began)
            if result.status != "FINISHED":
                raise RuntimeError(f"flintlock {mode} ended {result.status}")
        print(f"run {run + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in seconds.items()))
    for name, topic in outputs.items():  # the last round's
        found = count_committed(broker, topic)
        if found != args.records:
            raise RuntimeError(f"{name} wrote {found:,} records, not {args.records:,}")
    print(
        f"\nthroughput, {args.records:,} records, median of {args.runs} runs "
        f"(last round's outputs counted: {args.records:,} each)"
    )
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, value in medians.items():
        print(f"  {name:14} {value:7.2f} s  {args.records / value / 1e6:6.3f} M rec/s")
    for mode in ("AL", "EO"):
        ratio = medians[f"plain {mode}"] / medians[f"flintlock {mode}"]
        print(f"  flintlock/plain {mode} throughput: {ratio:.2f}x (target >= 0.8x)")


def percentiles(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50:6.3f} s  p99 {p99:6.3f} s  ({len(ordered):,} records)"


def run_probe(broker: KafkaBroker, source: str, target: str, args: Any) -> list[float]:
    results = SPAWN.Queue()
    process = SPAWN.Process(
        target=kafka_plain.probe,
        args=(broker.bootstrap, source, target, args.rate, args.latency_seconds, results),
    )
    process.start()
    latencies = results.get(timeout=args.latency_seconds + 120)
    process.join()
    expected = int(args.rate * args.latency_seconds)
    if len(latencies) != expected:
        raise RuntimeError(f"latency: {len(latencies):,} of {expected:,} records arrived")
    return latencies


def latency(spark: Any, broker: KafkaBroker, scratch: str, args: Any) -> None:
    from flintlock import EpochTrigger

    print(
        f"\nlatency, {args.rate:g} records/s for {args.latency_seconds:g} s, "
        f"arrival (read_committed) - send"
    )
    for mode, delivery in (("AL", "at-least-once"), ("EO", "exactly-once")):
        source = broker.create_topic(f"lat-in-{uuid.uuid4().hex[:8]}", 2)
        stop = SPAWN.Event()
        wait, target = plain(broker, source, None, mode == "EO", args.commit_seconds, stop)
        latencies = run_probe(broker, source, target, args)
        stop.set()
        wait()
        print(f"  plain {mode} (commit every {args.commit_seconds:g} s)  {percentiles(latencies)}")
        source = broker.create_topic(f"lat-in-{uuid.uuid4().hex[:8]}", 2)
        env, target = flintlock_job(spark, broker, scratch, source, delivery, bounded=False)
        client = env.execute_async(
            f"latency-{uuid.uuid4().hex[:8]}", trigger=EpochTrigger.processing_time(1.0)
        )
        latencies = run_probe(broker, source, target, args)
        client.stop()
        result = client.result(120)
        if result.status != "STOPPED":
            raise RuntimeError(f"the latency job ended {result.status}")
        print(f"  flintlock {mode} (1 s trigger)    {percentiles(latencies)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--commit-seconds", type=float, default=1.0)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--plain-producer", choices=["sink", "librdkafka"], default="sink")
    parser.add_argument("--skip", action="append", default=[], choices=["throughput", "latency"])
    args = parser.parse_args()
    PLAIN_SINK_DEFAULTS[0] = args.plain_producer == "sink"
    scratch = tempfile.mkdtemp(prefix="flintlock-kafka-bench-")
    broker = start_broker()
    try:
        spark = local_session(driver_memory="4g")
        if "throughput" not in args.skip:
            throughput(spark, broker, scratch, args)
        if "latency" not in args.skip:
            latency(spark, broker, scratch, args)
        spark.stop()
    finally:
        broker.remove()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
