"""Workload W1 (the Spark execution issue): map value*2 -> filter key%2==0 -> count, sum.

Input: ``spark.range(n)`` in 2 partitions, key = (i*2654435761) % 10000, value = (i % 1000)/10.0.
The same pipeline three ways: flintlock per batch, flintlock per record, and the raw
PySpark ``mapInArrow`` baseline doing the same pyarrow work.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock import OneInputStreamOperator, ProcessFunction, StreamExecutionEnvironment
from flintlock.operators.basic import FilterOperator, MapOperator
from flintlock.operators.process import ProcessOperator
from flintlock.testing import OneInputHarness

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


def double_row(row: dict[str, Any]) -> dict[str, Any]:
    """value * 2, per record."""
    return {"key": row["key"], "value": row["value"] * 2.0}


def even_row(row: dict[str, Any]) -> bool:
    """key % 2 == 0, per record."""
    return row["key"] % 2 == 0


def w1_arrow_input(n: int) -> pa.Table:
    """The W1 input without Spark: the same (key, value) rows as ``w1_input``."""
    i = np.arange(n, dtype=np.int64)
    return pa.table({"key": (i * 2654435761) % 10000, "value": (i % 1000) / 10.0})


def in_process_w1(batches: list[pa.RecordBatch]) -> tuple[int, float]:
    """W1 per record in one process, no Spark: the same operator chain a Spark task runs
    (map -> filter -> process), in flintlock's real one-input task (a harness)."""
    harness = OneInputHarness(
        MapOperator(double_row), FilterOperator(even_row), ProcessOperator(CountSumPerRecord())
    )
    for batch in batches:
        harness.process_batch(batch)
    harness.complete()
    table = harness.output()
    return sum(table.column("count").to_pylist()), sum(table.column("sum").to_pylist())


def python_loop_w1(batches: Iterable[pa.RecordBatch]) -> tuple[int, float]:
    """The per-record floor: a plain CPython loop over the same dicts and functions."""
    counter = CountSumPerRecord()
    counter.open()
    process = counter.process_element
    for batch in batches:
        keys, values = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        for key, value in zip(keys, values, strict=True):
            row = double_row({"key": key, "value": value})
            if even_row(row):
                process(row, None, None)
    return counter.count, counter.total


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
        stream = stream.map(double_row).filter(even_row).process(CountSumPerRecord())
    else:
        stream = stream.map_batch(double_value).filter_batch(even_key)
        stream = stream.transform("count_sum", CountSum)
    kind = "per-record" if per_record else "per-batch"
    table = stream.execute_and_collect(f"w1-{kind}-{uuid.uuid4().hex[:8]}")
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


def raw_map_in_arrow_w1_per_record(frame: Any) -> tuple[int, float]:
    """The per-record baseline: plain mapInArrow running the same functions per record
    (rows as dicts built from each batch's columns), one row per partition."""

    def work(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        count, total = python_loop_w1(batches)
        yield pa.record_batch([[count], [total]], schema=RESULT_SCHEMA)

    rows = frame.mapInArrow(work, "count long, sum double").toArrow()
    return sum(rows.column("count").to_pylist()), sum(rows.column("sum").to_pylist())
