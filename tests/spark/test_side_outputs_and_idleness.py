"""Side outputs and watermark statuses through real Spark exchanges."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
import side_output_functions
from pyspark import cloudpickle
from side_output_functions import BIG, ODD, Split

from flintlock import (
    CollectSink,
    OneInputStreamOperator,
    Source,
    SourceReader,
    StreamExecutionEnvironment,
    Watermark,
    WatermarkStrategy,
)

MAX = 2**63 - 1
cloudpickle.register_pickle_by_value(side_output_functions)  # workers cannot import tests/


@pytest.mark.parametrize("parallelism", [1, 2])
def test_side_outputs_on_spark(spark: Any, parallelism: int) -> None:
    env = StreamExecutionEnvironment(parallelism=parallelism, spark=spark)
    values = list(range(1, 301))
    split = env.from_collection([{"v": v} for v in values], batch_size=40).process(
        Split(), name="split"
    )
    main, odd, big = (CollectSink(name=n) for n in ("main", "odd-rows", "big-rows"))
    split.sink_to(main, name="main")  # chained to split: the side outputs leave the task
    split.get_side_output(ODD).sink_to(odd, name="odd-rows")
    split.get_side_output(BIG).key_by("note").sink_to(big, name="big-rows")
    result = env.execute("side-outputs")
    assert sorted(result.collected["main"].column("v").to_pylist()) == [
        v for v in values if v % 2 == 0
    ]
    assert sorted(result.collected["odd-rows"].column("v").to_pylist()) == [
        v for v in values if v % 2
    ]
    big_rows = result.collected["big-rows"]
    assert sorted(big_rows.column("v").to_pylist()) == [v for v in values if v > 100]
    assert set(big_rows.column("note").to_pylist()) == {"big"}


class _PausingReader(SourceReader):
    """Rows at ts 1, a pause longer than the idle timeout, "nothing now", rows at ts 5."""

    def read(self) -> Iterator[pa.RecordBatch]:
        yield pa.record_batch({"t": pa.array([1], pa.int64())})
        time.sleep(0.3)
        yield pa.record_batch({"t": pa.array([], pa.int64())})
        yield pa.record_batch({"t": pa.array([5], pa.int64())})

    def positions(self) -> dict[str, int]:
        return {}


class Pausing(Source):
    schema = pa.schema([("t", pa.int64())])

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        return _PausingReader()


class EventTimeLog(OneInputStreamOperator):
    """Emits, at finish, what reached it: row counts, watermarks and statuses, in order."""

    def __init__(self, name: str = "log") -> None:
        super().__init__(name)
        self.log: list[dict[str, Any]] = []

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.log.append({"event": "rows", "value": batch.num_rows})

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        self.log.append({"event": "watermark", "value": watermark.timestamp})
        super().process_watermark(watermark, input_index)

    def process_watermark_status(self, idle: bool, input_index: int = 1) -> None:
        self.log.append({"event": "idle" if idle else "active", "value": input_index})
        super().process_watermark_status(idle, input_index)

    def finish(self) -> None:
        schema = pa.schema([("event", pa.string()), ("value", pa.int64())])
        self.output.emit(pa.RecordBatch.from_pylist(self.log, schema=schema))


def test_an_idle_source_subtask_is_seen_idle_downstream(spark: Any) -> None:
    env = StreamExecutionEnvironment(parallelism=1, spark=spark)
    strategy = WatermarkStrategy("t").with_idleness(timedelta(milliseconds=100))
    logged = (
        env.from_source(Pausing(), strategy)
        .rebalance()  # across an exchange: statuses travel as messages
        .transform("log", EventTimeLog)
        .set_task_type("one-input")
    )
    rows = logged.execute_and_collect("idleness").to_pylist()
    assert [(r["event"], r["value"]) for r in rows] == [
        ("rows", 1),
        ("watermark", 0),
        ("rows", 0),
        ("idle", 1),  # 300 ms without a row >= 100 ms
        ("rows", 1),
        ("active", 1),
        ("watermark", 4),
        ("watermark", MAX),
    ]
