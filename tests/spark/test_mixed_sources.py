"""A job that reads a bounded source beside an unbounded one (issue 33): the bounded
source reads its whole input in the first epoch and finishes there (FLIP-147), the
unbounded one reads epoch by epoch; across a stop and a restart every row is committed
exactly once, and each key's sum equals a plain Python pass over the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import unbounded_jobs
from pyspark import cloudpickle
from unbounded_jobs import KEYS, RunningSumUntilTheEnd, committed_rows, wait_for_epochs

from flintlock import EpochTrigger, WatermarkStrategy
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.files import FileSink

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/

PER_EPOCH = 100
END = 1_000
BOUNDED = [{"id": 1_000_000 + i, "event_time": i} for i in range(60)]
"""The bounded source's rows: ids apart from the sequence's 0..END-1."""


def mixed_job(spark: Any, base: str) -> StreamExecutionEnvironment:
    """A collection and an endless-until-END sequence, unioned, summed per key."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    schema = pa.schema([("id", pa.int64()), ("event_time", pa.int64())])
    bounded = env.from_collection(BOUNDED, schema=schema, watermark_strategy=strategy)
    unbounded = env.from_sequence(rows_per_epoch=PER_EPOCH, end=END, watermark_strategy=strategy)
    keyed = bounded.union(unbounded).key_by(lambda row: row["id"] % KEYS)
    keyed.process(RunningSumUntilTheEnd()).sink_to(FileSink(f"{base}/out"), name="files")
    return env


def reference() -> dict[int, int]:
    """Plain Python over the same rows: each key's total."""
    totals: dict[int, int] = {}
    for i in [*range(END), *(row["id"] for row in BOUNDED)]:
        totals[i % KEYS] = totals.get(i % KEYS, 0) + i
    return totals


def test_a_bounded_source_beside_an_unbounded_one_is_read_once(spark: Any, tmp_path: Path) -> None:
    base = str(tmp_path)
    client = mixed_job(spark, base).execute_async("mixed")
    wait_for_epochs(client, 3)
    client.stop()
    stopped = client.result()
    assert stopped.status == "STOPPED"
    ids = sorted(r["id"] for r in committed_rows(base) if r["id"] >= 0)
    read = PER_EPOCH * stopped.epochs
    assert ids == [*range(read), *(row["id"] for row in BOUNDED)]  # all of it in epoch 1

    resumed = mixed_job(spark, base).execute("mixed", trigger=EpochTrigger.processing_time(0))
    assert resumed.status == "FINISHED"
    rows = committed_rows(base)
    ids = sorted(r["id"] for r in rows if r["id"] >= 0)
    assert ids == [*range(END), *(row["id"] for row in BOUNDED)]  # each row exactly once
    finals = {r["k"]: r["total"] for r in rows if r["id"] == -1}  # at the input's end
    assert finals == reference()
