"""The same Nexmark queries run by Spark Structured Streaming, in Spark SQL with
watermarks, for the side-by-side figure: the events are written to Parquet first (one file
per epoch and kind), then read one file per trigger, so Spark's time leaves generation out
where flintlock's includes it (flintlock's figures are the conservative side)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .flintlock_run import Throughput
from .model import KINDS, Generator, NexmarkConfig, events_of_kind

SPARK_SQL: dict[str, str] = {
    "q0": "SELECT auction, bidder, price, date_time, extra FROM bid",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": """SELECT P.name, P.city, P.state, A.id FROM auction A JOIN person P
             ON A.seller = P.id
             WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    "q11": """SELECT bidder, count(*) AS bid_count, session_window.start AS starttime,
              session_window.end AS endtime FROM bid
              GROUP BY bidder, session_window(date_time, '10 seconds')""",
    "q14": """SELECT auction, bidder, 0.908 * price AS price,
              CASE WHEN hour(date_time) BETWEEN 8 AND 18 THEN 'dayTime'
                   WHEN hour(date_time) <= 6 OR hour(date_time) >= 20 THEN 'nightTime'
                   ELSE 'otherTime' END AS bid_time_type,
              date_time, extra,
              length(extra) - length(replace(extra, 'c', '')) AS c_counts
              FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    "q20": """SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time, B.extra,
              A.item_name, A.description, A.initial_bid, A.reserve,
              A.date_time AS auction_date_time, A.expires, A.seller, A.category
              FROM bid B JOIN auction A ON A.id = B.auction WHERE A.category = 10""",
}
"""Queries Spark Structured Streaming runs in append mode. Not here: q4, q6, q15-q17 and
q19 (updating aggregates, complete/update mode only), q5 and q7 (an aggregate over an
aggregate's windows, or a join with one), q8 (a join of two windowed aggregates), q12
(processing-time windows), q13 (a lookup join)."""


def write_events(
    folder: str, kinds: tuple[str, ...], events: int, epochs: int, config: NexmarkConfig
) -> None:
    """Each kind's events as ``epochs`` Parquet files, time stamps in UTC."""
    generator = Generator(config)
    per_epoch = -(-events // epochs)
    for kind in kinds:
        os.makedirs(f"{folder}/{kind}", exist_ok=True)
        for epoch in range(epochs):
            low, high = epoch * per_epoch, min((epoch + 1) * per_epoch, events)
            batch = generator.batch(KINDS[kind], events_of_kind(low, high, KINDS[kind]))
            table = pa.Table.from_batches([batch])
            for name in ("date_time", "expires"):
                if name in table.column_names:
                    index = table.column_names.index(name)
                    stamps = table.column(name).cast(pa.timestamp("ms", tz="UTC"))
                    table = table.set_column(index, name, stamps)
            pq.write_table(table, f"{folder}/{kind}/part-{epoch:05d}.parquet")


STATE_STORE = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_run(
    spark: Any,
    name: str,
    inputs: tuple[str, ...],
    events: int,
    epochs: int,
    cores: int,
    config: NexmarkConfig,
) -> Throughput:
    """Query ``name`` in Spark Structured Streaming: one file per kind per trigger, into
    the noop sink, checkpointed each micro-batch; throughput without the first batch."""
    # state off the JVM heap, as Spark advises for large state: q20's join state outgrows
    # the default 1 GB driver heap of local mode at 10 M events with the default provider
    spark.conf.set(STATE_STORE, ROCKSDB)
    with tempfile.TemporaryDirectory(prefix="nexmark-spark-") as folder:
        write_events(folder, inputs, events, epochs, config)
        bound = config.max_out_of_orderness_ms
        for kind in inputs:
            schema = spark.read.parquet(f"{folder}/{kind}").schema
            stream = (
                spark.readStream.schema(schema)
                .option("maxFilesPerTrigger", 1)
                .parquet(f"{folder}/{kind}")
                .withWatermark("date_time", f"{bound} milliseconds")
            )
            stream.createOrReplaceTempView(kind)
        query = (
            spark.sql(SPARK_SQL[name])
            .writeStream.format("noop")
            .outputMode("append")
            .option("checkpointLocation", f"{folder}/_checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        progress = query.recentProgress
    seconds = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress]
    batches = [p for p in progress if p["numInputRows"] > 0]
    per_epoch = -(-events // epochs)
    steady = seconds[1:] or seconds
    steady_events = events - per_epoch if len(batches) > 1 else events
    return Throughput(
        query=name,
        form="spark",
        events=events,
        epochs=len(batches),
        events_per_core_second=steady_events / sum(steady) / cores,
        epoch_seconds=seconds,
        checkpoint_ms=[
            float(p["durationMs"].get("commitOffsets", 0) + p["durationMs"].get("walCommit", 0))
            for p in progress
        ],
        checkpoint_bytes=[
            sum(int(s.get("memoryUsedBytes", 0)) for s in p.get("stateOperators", []))
            for p in progress
        ],
        output_rows=sum(int(p["sink"].get("numOutputRows", 0) or 0) for p in progress),
    )
