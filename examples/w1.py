"""Workload W1 (the Spark execution issue): map value*2 -> filter key%2==0 -> count, sum.

Input: ``spark.range(n)`` in 2 partitions, key = (i*2654435761) % 10000, value = (i % 1000)/10.0.
The same pipeline three ways: flintlock per batch, flintlock per record, and the raw
PySpark ``mapInArrow`` baseline doing the same pyarrow work.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flintlock import OneInputStreamOperator, ProcessFunction, StreamExecutionEnvironment

RESULT_SCHEMA = pa.schema([("count", pa.int64()), ("sum", pa.float64())])


def w1_input(spark: Any, n: int, partitions: int = 2) -> Any:
    """The W1 input DataFrame (key, value), in ``partitions`` partitions."""
    from pyspark.sql import functions as F

    return spark.range(0, n, 1, partitions).select(
        ((F.col("id") * F.lit(2654435761)) % 10000).alias("key"),
        ((F.col("id") % 1000) / 10.0).alias("value"),
    )


def double_value(batch: pa.RecordBatch) -> pa.RecordBatch:
    """value * 2, per batch."""
    return batch.set_column(1, "value", pc.multiply(batch.column(1), 2.0))


def even_key(batch: pa.RecordBatch) -> pa.Array:
    """key % 2 == 0, per batch."""
    return pc.equal(pc.bit_wise_and(batch.column(0), 1), 0)


class CountSum(OneInputStreamOperator):
    """Counts and sums per batch; one row per subtask when the input ends."""

    def open(self) -> None:
        self.count, self.total = 0, 0.0

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.count += batch.num_rows
        self.total += pc.sum(batch.column("value")).as_py() or 0.0

    def end_input(self, input_index: int) -> None:
        self.output.emit(pa.record_batch([[self.count], [self.total]], schema=RESULT_SCHEMA))


class CountSumPerRecord(ProcessFunction):
    """The same, one record at a time."""

    output_schema = RESULT_SCHEMA

    def open(self) -> None:
        self.count, self.total = 0, 0.0

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.count += 1
        self.total += value["value"]

    def on_end_of_input(self, out: Any) -> None:
        out.collect({"count": self.count, "sum": self.total})


def flintlock_w1(
    spark: Any, frame: Any, parallelism: int, per_record: bool, checkpoint_dir: str
) -> tuple[int, float]:
    """Run W1 on flintlock; returns (count, sum) over all subtasks.

    The source reads ``frame`` in place (a subtask per partition); each call is a new job
    (its own name), since a finished job's name returns its stored result."""
    env = StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=checkpoint_dir
    )
    stream = env.from_dataframe(frame)
    if per_record:
        stream = stream.map(lambda r: {"key": r["key"], "value": r["value"] * 2.0})
        stream = stream.filter(lambda r: r["key"] % 2 == 0).process(CountSumPerRecord())
    else:
        stream = stream.map_batch(double_value).filter_batch(even_key)
        stream = stream.transform("count_sum", CountSum)
    kind = "per-record" if per_record else "per-batch"
    table = stream.collect(f"w1-{kind}-{uuid.uuid4().hex[:8]}")
    return sum(table.column("count").to_pylist()), sum(table.column("sum").to_pylist())


def raw_map_in_arrow_w1(frame: Any) -> tuple[int, float]:
    """The baseline: the same pyarrow work in plain mapInArrow over ``frame``'s own
    partitions, one row per partition."""

    def work(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        count, total = 0, 0.0
        for batch in batches:
            kept = double_value(batch).filter(even_key(batch))
            count += kept.num_rows
            total += pc.sum(kept.column("value")).as_py() or 0.0
        yield pa.record_batch([[count], [total]], schema=RESULT_SCHEMA)

    rows = frame.mapInArrow(work, "count long, sum double").toArrow()
    return sum(rows.column("count").to_pylist()), sum(rows.column("sum").to_pylist())
