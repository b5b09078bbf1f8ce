"""The unbounded job the epoch tests run: a sequence -> keyed running sum -> FileSink.

Each key's function keeps a running sum and an event-time timer far in the future: it
fires only when the input ends (MAX_WATERMARK: the sequence's end, or a stop with
drain), emitting one row per key with id -1 and the key's final total.

``python unbounded_jobs.py BASE KILL_AFTER [MODE]``: runs the job with its driver SIGKILLed
after KILL_AFTER epochs (before the next one starts), once; MODE is the FileSink's.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flintlock import FlintlockError, KeyedProcessFunction, ValueStateDescriptor, WatermarkStrategy
from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.job.client import JobClient
from flintlock.core.spark.job_group import running_epoch
from flintlock.sinks.files import FileSink

KEYS = 5
OUT = pa.schema([("k", pa.int64()), ("id", pa.int64()), ("total", pa.int64())])
FAR = 10**12
"""The timers' time: after every row's event time, before MAX_WATERMARK."""


class RunningSumUntilTheEnd(KeyedProcessFunction):
    """Emits each row with its key's running sum; at the input's end, the key's total.
    Any integer key works (``id % KEYS`` here, another modulus in partial_jobs)."""

    output_schema = OUT

    def open(self) -> None:
        self.total = self.runtime_context.get_state(
            ValueStateDescriptor("total", pa.int64(), default=0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.total.update(self.total.value() + value["id"])
        ctx.timer_service().register_event_time_timer(FAR)
        out.collect({"k": ctx.get_current_key(), "id": value["id"], "total": self.total.value()})

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect({"k": ctx.get_current_key(), "id": -1, "total": self.total.value()})


class SlowRunningSum(RunningSumUntilTheEnd):
    """RunningSumUntilTheEnd taking 0.1 s a row: an epoch of 20 rows runs a second or
    more, long enough to ask for something while it runs."""

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        time.sleep(0.1)
        super().process_element(value, ctx, out)


class FailsFrom(RunningSumUntilTheEnd):
    """The running sum, failing on every id from ``first_failing`` on."""

    def __init__(self, first_failing: int) -> None:
        super().__init__()
        self.first_failing = first_failing

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        if value["id"] >= self.first_failing:
            raise RuntimeError(f"injected failure at id {value['id']}")
        super().process_element(value, ctx, out)


def epoch_under_way(job_name: str, first: int, timeout: float = 180.0) -> int:
    """The epoch (checkpoint id) of ``job_name`` that runs now, once it is at least
    ``first`` and its Spark action has run 0.3 s (this process runs the job)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = running_epoch(job_name)
        if job is not None and job.epoch >= first and time.monotonic() - job.started > 0.3:
            return job.epoch
        time.sleep(0.02)
    raise AssertionError(f"no epoch >= {first} of {job_name} ran in {timeout} s")


class SavepointCommitFailsOnce(FileSink):
    """A FileSink whose commit of a savepoint publishes one file, then fails, once."""

    def __init__(self, path: str, marker: str) -> None:
        super().__init__(path, rows_per_file=50)
        self.marker = marker
        self.in_savepoint = False

    def commit(self, context: Any, committables: list[Any]) -> None:
        folder = f"{context.job_dir}/checkpoints/chk-{context.checkpoint_id}"
        metadata = context.storage.read_json(f"{folder}/_metadata.json")
        self.in_savepoint = metadata.get("kind") == "savepoint"
        super().commit(context, committables)

    def commit_file(self, filesystem: Any, file: dict[str, Any]) -> None:
        super().commit_file(filesystem, file)
        if self.in_savepoint and not os.path.exists(self.marker):
            with open(self.marker, "w") as marker:
                marker.write("failed once")
            raise OSError("injected: the disk went away after one file")


class CommitFailsOnceAt(FileSink):
    """A FileSink whose commit of checkpoint ``checkpoint_id`` publishes one file, then
    fails, once (a marker file on the driver remembers it failed)."""

    def __init__(self, path: str, marker: str, checkpoint_id: int) -> None:
        super().__init__(path)
        self.marker = marker
        self.checkpoint_id = checkpoint_id
        self.failing = False

    def commit(self, context: Any, committables: list[Any]) -> None:
        self.failing = context.checkpoint_id == self.checkpoint_id
        super().commit(context, committables)

    def commit_file(self, filesystem: Any, file: dict[str, Any]) -> None:
        super().commit_file(filesystem, file)
        if self.failing and not os.path.exists(self.marker):
            with open(self.marker, "w") as marker:
                marker.write("failed once")
            raise OSError("injected: the store went away after one file")


class CommitLooksForTheNextEpoch(FileSink):
    """A FileSink whose commit of each checkpoint notes (a JSON line in ``notes``) the
    checkpoint of the job's epoch running meanwhile: it waits up to a minute for one
    past its own when commits may run beside the next epoch, and looks once when not."""

    def __init__(self, path: str, notes: str, job_name: str, beside: bool) -> None:
        super().__init__(path)
        self.notes, self.job_name = notes, job_name
        self.commits_beside_next_epoch = beside

    def commit(self, context: Any, committables: list[Any]) -> None:
        deadline = time.monotonic() + (60.0 if self.commits_beside_next_epoch else 0.0)
        while True:
            job = running_epoch(self.job_name)
            running = job.checkpoint_id if job is not None else None
            if (running or 0) > context.checkpoint_id or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        with open(self.notes, "a") as notes:
            notes.write(json.dumps([context.checkpoint_id, running]) + "\n")
        super().commit(context, committables)


def build(
    spark: Any,
    base: str,
    plugins: list[Any] = (),
    end: int | None = None,
    per_epoch: int = 300,
    sink: TwoPhaseCommitSink | None = None,
    function: KeyedProcessFunction | None = None,
    parallelism: int = 2,
    **options: Any,
) -> StreamExecutionEnvironment:
    """The job: ``per_epoch`` ids per epoch (up to ``end``), summed per ``id % KEYS``;
    ``options`` go to the environment (``lease_seconds``, ``retained_checkpoints``)."""
    env = StreamExecutionEnvironment(
        parallelism=parallelism,
        spark=spark,
        checkpoint_dir=f"{base}/chk",
        plugins=list(plugins),
        **options,
    )
    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    stream = env.from_sequence(end=end, rows_per_epoch=per_epoch, watermark_strategy=strategy)
    keyed = stream.key_by(lambda row: row["id"] % KEYS).process(function or RunningSumUntilTheEnd())
    keyed.sink_to(sink or FileSink(f"{base}/out"), name="files")
    return env


def wait_for_epochs(
    client: JobClient, count: int, timeout: float = 180.0, after_run: str | None = None
) -> None:
    """Until the running job reports ``count`` epochs (its status file) of a run other
    than ``after_run`` (the status file of a stopped run stays until the next writes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not client.is_running():
            client.result()  # raises the job's error
            raise AssertionError(f"the job ended before {count} epochs")
        try:
            status = client.status()
            if len(status["epochs"]) >= count and status["run_id"] != after_run:
                return
        except FlintlockError:
            pass  # no epoch completed yet
        time.sleep(0.1)
    raise AssertionError(f"the job did not run {count} epochs in {timeout} s")


def committed_rows(base: str) -> list[dict[str, Any]]:
    """Every row the FileSink committed, across all runs."""
    if not os.path.isdir(f"{base}/out"):
        return []
    return pq.read_table(f"{base}/out").to_pylist()


def killed_after(epochs: int) -> Callable[[dict[str, Any]], None]:
    """A progress callback that SIGKILLs the driver once ``epochs`` epochs committed."""

    def progress(figures: dict[str, Any]) -> None:
        if figures["epoch"] == epochs:
            os.kill(os.getpid(), signal.SIGKILL)

    return progress


if __name__ == "__main__":
    from job_scripts import start_session
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import it
    base, kill_after = sys.argv[1], int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "error"
    env = build(start_session("local[2]"), base, end=3000, sink=FileSink(f"{base}/out", mode=mode))
    env.execute("unbounded", progress=killed_after(kill_after))
    print("RESULT not killed")
