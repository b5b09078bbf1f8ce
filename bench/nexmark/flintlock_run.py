"""Timed flintlock runs of Nexmark queries: throughput at steady state with checkpoints,
the check against DuckDB, and latency at a fixed input rate."""

from __future__ import annotations

import glob
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock import EpochTrigger, SinkFunction, StreamExecutionEnvironment

from .check import differences, input_streams, output_of, reference, run_collected
from .model import NexmarkConfig
from .queries import Query


class BlackHole(SinkFunction):
    """Drops every batch (Flink's Nexmark writes to its blackhole connector too)."""

    def write_batch(self, batch: pa.RecordBatch) -> None:
        pass


class LatencySink(SinkFunction):
    """Saves, per output batch, each row's ``column`` (when the row could first be
    computed: an event time, which is wall time in a latency run, or a window's end) and
    the wall time the row reached the sink, as a .npy file in ``folder`` (an epoch's task
    ends without finish(), so nothing waits for it)."""

    def __init__(self, column: str, folder: str) -> None:
        self.column = column
        self.folder = folder

    def write_batch(self, batch: pa.RecordBatch) -> None:
        now_ms = time.time() * 1000
        stamps = pc.cast(batch.column(self.column), pa.int64()).to_numpy(zero_copy_only=False)
        pairs = np.stack([stamps.astype(np.float64), np.full(len(stamps), now_ms)])
        np.save(f"{self.folder}/latency-{time.time_ns()}-{os.getpid()}.npy", pairs)


@dataclass
class Throughput:
    """A timed run: events per second per core at steady state (first epoch left out)."""

    query: str
    form: str
    events: int
    epochs: int
    events_per_core_second: float
    epoch_seconds: list[float]
    checkpoint_ms: list[float]
    checkpoint_bytes: list[int]
    output_rows: int


def timed_run(
    spark: Any,
    query: Query,
    form: str,
    events: int,
    epochs: int,
    parallelism: int,
    cores: int,
    config: NexmarkConfig,
) -> Throughput:
    """``events`` events in ``epochs`` epochs (a checkpoint each) into a black hole."""
    with tempfile.TemporaryDirectory(prefix="nexmark-") as folder:
        env = StreamExecutionEnvironment(
            parallelism=parallelism, spark=spark, checkpoint_dir=folder
        )
        per_epoch = -(-events // epochs)
        streams = input_streams(env, query.inputs, events, per_epoch, config=config)
        output_of(query, form, streams).sink_to(BlackHole(), name="blackhole")
        result = env.execute(f"{query.name}-{form}")
    documents = result.metrics["epochs"]
    seconds = [float(d["seconds"]) for d in documents]
    steady = seconds[1:] or seconds
    steady_events = events - per_epoch if len(seconds) > 1 else events
    return Throughput(
        query=query.name,
        form=form,
        events=events,
        epochs=len(seconds),
        events_per_core_second=steady_events / sum(steady) / cores,
        epoch_seconds=seconds,
        checkpoint_ms=[float(d["checkpoint"]["durationMs"]) for d in documents],
        checkpoint_bytes=[int(d["checkpoint"]["sizeBytes"]) for d in documents],
        output_rows=sum(n for name, n in result.records_out.items() if name.endswith("blackhole")),
    )


def checked_run(
    spark: Any, query: Query, form: str, events: int, config: NexmarkConfig
) -> list[str]:
    """The query on ``events`` events in 4 epochs, collected and compared with DuckDB:
    the differences ([] when equal)."""
    with tempfile.TemporaryDirectory(prefix="nexmark-check-") as folder:
        outputs = run_collected(spark, [query.name], events, config, folder, "check", [form])
    expected = reference(query, events, config)
    if expected.num_rows == 0:
        return [f"{query.name}: the reference is empty at {events:,} events: nothing checked"]
    return differences(query, outputs[query.name, form], expected)


def latency_run(
    spark: Any,
    query: Query,
    form: str,
    rate: int,
    seconds: float,
    parallelism: int,
    trigger_seconds: float = 1.0,
) -> dict[str, float]:
    """The query fed ``rate`` events per second of wall time for ``seconds``, an epoch per
    ``trigger_seconds``: p50 and p99 of output time minus the time its row was computable
    (rows of windows the end of the input closed are left out: ``closed_by_end``)."""
    with tempfile.TemporaryDirectory(prefix="nexmark-latency-") as folder:
        start_ms = int(time.time() * 1000) + 3000  # event n exists from start + n / rate
        config = NexmarkConfig(base_time_ms=start_ms, event_rate=rate)
        events = int(rate * seconds)
        env = StreamExecutionEnvironment(
            parallelism=parallelism, spark=spark, checkpoint_dir=folder
        )
        streams = input_streams(env, query.inputs, events, config=config, paced_by_event_time=True)
        assert query.latency_column is not None, f"{query.name} has no latency column"
        sink = LatencySink(query.latency_column, folder)
        output_of(query, form, streams).sink_to(sink, name="latency")
        env.execute(
            f"{query.name}-{form}-latency", trigger=EpochTrigger.processing_time(trigger_seconds)
        )
        files = sorted(glob.glob(f"{folder}/latency-*.npy"))
        pairs = np.concatenate([np.load(f) for f in files], axis=1) if files else np.zeros((2, 0))
    # a window or session ending after the last event was closed by the end of the input
    # (the final watermark), not by time: its latency means nothing
    last_event_ms = start_ms + (events - 1) * 1000 // rate
    timely = pairs[:, pairs[0] <= last_event_ms]
    latencies = timely[1] - timely[0]
    figures = {"rows": int(latencies.size), "closed_by_end": int(pairs.shape[1] - latencies.size)}
    if latencies.size == 0:
        return figures | {"p50_s": float("nan"), "p99_s": float("nan")}
    return figures | {
        "p50_s": float(np.percentile(latencies, 50)) / 1000,
        "p99_s": float(np.percentile(latencies, 99)) / 1000,
    }


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
