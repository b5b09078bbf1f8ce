"""The same Nexmark queries run by Spark Structured Streaming, in Spark SQL with
watermarks, for the side-by-side figure: the events are written to Parquet first (one file
per epoch and kind), then read one file per trigger, so Spark's time leaves generation out
where flintlock's includes it (flintlock's figures are the conservative side)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .flintlock_run import Throughput
from .model import KINDS, Generator, NexmarkConfig, events_of_kind
from .queries.joins import SIDE_KEYS, write_side_input

SPARK_SQL: dict[str, str] = {
    "q0": "SELECT auction, bidder, price, date_time, extra FROM bid",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": """SELECT P.name, P.city, P.state, A.id FROM auction A JOIN person P
             ON A.seller = P.id
             WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    "q5": """WITH counts AS (
                 SELECT auction, count(*) AS num, window FROM bid
                 GROUP BY auction, window(date_time, '10 seconds', '2 seconds'))
             SELECT hot.auction, hot.num, unix_millis(window.start) AS starttime,
                    unix_millis(window.end) AS endtime
             FROM (SELECT window, max(num) AS most,
                          collect_list(named_struct('auction', auction, 'num', num)) AS nums
                   FROM counts GROUP BY window)
             LATERAL VIEW explode(filter(nums, c -> c.num = most)) AS hot""",
    "q7": """SELECT B.auction, B.bidder, B.price, B.date_time, B.extra FROM bid B
             JOIN (SELECT window_time(window) AS last, price
                   FROM (SELECT window, max(price) AS price FROM bid
                         GROUP BY window(date_time, '10 seconds'))) H
             ON B.price = H.price AND B.date_time > H.last - INTERVAL 10 SECONDS
                AND B.date_time <= H.last""",
    "q8": """SELECT P.id, P.name, P.window.start AS starttime
             FROM (SELECT id, name, window FROM person
                   GROUP BY id, name, window(date_time, '10 seconds')) P
             JOIN (SELECT seller, window FROM auction
                   GROUP BY seller, window(date_time, '10 seconds')) A
             ON P.id = A.seller AND P.window = A.window""",
    "q11": """SELECT bidder, count(*) AS bid_count, session_window.start AS starttime,
              session_window.end AS endtime FROM bid
              GROUP BY bidder, session_window(date_time, '10 seconds')""",
    "q13": f"""SELECT B.auction, B.bidder, B.price, B.date_time, S.value
              FROM bid B JOIN side_input S ON B.auction % {SIDE_KEYS} = S.key""",
    "q14": """SELECT auction, bidder, 0.908 * price AS price,
              CASE WHEN hour(date_time) BETWEEN 8 AND 18 THEN 'dayTime'
                   WHEN hour(date_time) <= 6 OR hour(date_time) >= 20 THEN 'nightTime'
                   ELSE 'otherTime' END AS bid_time_type,
              date_time, extra,
              length(extra) - length(replace(extra, 'c', '')) AS c_counts
              FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    "q17": """SELECT auction, day, count(*) AS total_bids,
              count(*) FILTER (WHERE price < 10000) AS rank1_bids,
              count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
              count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
              min(price) AS min_price, max(price) AS max_price,
              sum(price) DIV count(*) AS avg_price, sum(price) AS sum_price
              FROM (SELECT auction, price, date_format(to_utc_timestamp(date_time,
                           current_timezone()), 'yyyy-MM-dd') AS day FROM bid)
              GROUP BY auction, day""",
    "q20": """SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time, B.extra,
              A.item_name, A.description, A.initial_bid, A.reserve,
              A.date_time AS auction_date_time, A.expires, A.seller, A.category
              FROM bid B JOIN auction A ON A.id = B.auction WHERE A.category = 10""",
}
"""Queries Spark Structured Streaming runs, in append mode unless ``OUTPUT_MODES`` says
otherwise. q5 and q7 chain stateful operators (Spark 3.4+, append mode only): q5 an
aggregate over the sliding windows' counts (ties kept), q7 a time-interval join of the
bids with their window's highest price on ``window_time`` (a range on the window's start
and end joins too, but never drops the bids' join state). q8 joins two windowed
aggregates on the window, q13 joins the bids with a static table (no state), q17 runs in
update mode, its day the UTC day, as DuckDB's, whatever the session's time zone. A
window still open at the input's end is never emitted: Spark's last watermark stays the
bound behind the last event. Not here: q4 and q6 (an aggregate of the winning bids, a
join's per-auction aggregate: append mode needs a window a watermark closes, update mode
refuses chained stateful operators, and q6's average of the last 10 is an OVER window,
which streaming refuses), q15 and q16 (count DISTINCT, refused), q19 (row_number OVER,
refused) and q12 (processing-time windows)."""

_OPEN_AT_THE_END = "Spark never emits the windows still open when its input ends"
SPARK_ROWS_DIFFER: dict[str, str] = {
    "q5": _OPEN_AT_THE_END,
    "q7": _OPEN_AT_THE_END,
    "q8": _OPEN_AT_THE_END,
    "q11": "Spark never closes the sessions still open when its input ends",
    "q17": "updates: Spark's one per group and micro-batch, flintlock's one per group and batch",
}
"""Why Spark's row count differs from flintlock's (and DuckDB's) where it does."""

OUTPUT_MODES: dict[str, str] = {"q17": "update"}
"""q17 groups by (auction, day), no event-time window a watermark closes, which append
mode needs: Spark emits each group a micro-batch changed, as flintlock's q17 does."""


def _side_input(spark: Any) -> Any:
    """q13's side table: the CSV file flintlock's q13 reads, as a static DataFrame."""
    path = write_side_input()
    return spark.read.csv(str(path), header=True, schema="key BIGINT, value STRING")


STATIC_TABLES: dict[str, dict[str, Callable[[Any], Any]]] = {"q13": {"side_input": _side_input}}
"""The static tables (view: reader) a query joins its streams with."""


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
    """Query ``name`` in Spark Structured Streaming: one file per kind per trigger (and its
    static tables), into the noop sink in its output mode, checkpointed each micro-batch;
    throughput without the first batch."""
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
        for view, read in STATIC_TABLES.get(name, {}).items():
            read(spark).createOrReplaceTempView(view)
        query = (
            spark.sql(SPARK_SQL[name])
            .writeStream.format("noop")
            .outputMode(OUTPUT_MODES.get(name, "append"))
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
