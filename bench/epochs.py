"""Epoch overhead and end-to-end latency of an unbounded job on local Spark (issue 14).

1. Overhead: a trivial job (sequence source, a few rows per epoch -> map_batch -> FileSink)
   runs epochs back to back; after every epoch the progress callback runs the baseline
   once, a trivial two-stage Spark job with an exact exchange (``spark.range(0, 2, 1, 2)
   .mapInArrow(f).repartitionById(2, "route").mapInArrow(g).toArrow()``, in the
   bench session, which has flintlock's stage settings: AQE off), so
   both are measured interleaved in the same session. An epoch's cycle is the time from
   one progress callback's return to the next callback (everything the driver does per
   epoch); the split of it comes from timers around the driver's steps (core unchanged).
   The map tags each row with its Python worker's pid: are workers reused per epoch?
2. Worker reuse: the baseline against the same job whose first stage leaves its input
   unread, as a source subtask does (PySpark then does not reuse the worker).
3. Latency: ``rows_per_second`` rows through map_batch into a FileSink at a 1 s
   processing-time trigger; a thread polls the output folder for committed part files,
   and each row's latency is the time its file appeared minus its ``event_time``.

1 and 3 check their output (every id exactly once, checkpoints in event-time order) and
exit 1 if not.

    python bench/epochs.py [--epochs 40] [--rows-per-epoch 4] [--rate 100] [--seconds 8]
        [--skip overhead|reuse|latency]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import cloudpickle
from timing import local_session

from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import build_registry
from flintlock.core.job import run_end, run_start
from flintlock.core.job.control import JobControl
from flintlock.core.job.run import JobRun
from flintlock.core.job.schedules import TriggeredEpochs
from flintlock.core.spark.epoch_frames import EpochFrames
from flintlock.core.spark.stage import StageFunction
from flintlock.sinks.files import FileSink

ROUTED = pa.schema([("id", pa.int64()), ("route", pa.int32())])
PART_FILE = re.compile(r"^part-[0-9a-f]+-chk(\d+)-\d+-\d+\.parquet$")


class BenchFailure(Exception):
    """A benchmark's own check failed: its figures must not be used."""


# ---- the baseline: a trivial two-stage Spark job with an exact exchange ----


def _route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 1: each id with its target partition (id % 2); reads all its input."""
    for batch in batches:
        ids = batch.column(0).to_pylist()
        yield pa.RecordBatch.from_pydict({"id": ids, "route": [i % 2 for i in ids]}, schema=ROUTED)


def _route_unread(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 1 as a source subtask does it: emits without reading its partition's rows."""
    from pyspark import TaskContext

    partition = TaskContext.get().partitionId()  # type: ignore[union-attr]
    yield pa.RecordBatch.from_pydict({"id": [partition], "route": [partition]}, schema=ROUTED)


def _receive(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 2: pass the rows on."""
    yield from batches


BUILD_SECONDS: list[float] = []
"""How long building each baseline DataFrame took (before its action)."""


def baseline_job(spark: Any, first: Any = _route) -> float:
    """One run of the baseline (a new DataFrame, one action); its seconds."""
    started = time.perf_counter()
    frame = (
        spark.range(0, 2, 1, 2)
        .mapInArrow(first, "id long, route int")
        .repartitionById(2, "route")
        .mapInArrow(_receive, "id long, route int")
    )
    BUILD_SECONDS.append(time.perf_counter() - started)
    table = frame.toArrow()
    seconds = time.perf_counter() - started
    if sorted(table.column("id").to_pylist()) != [0, 1]:
        raise BenchFailure(f"the baseline job returned {table.to_pylist()}, not ids 0 and 1")
    return seconds


# ---- the driver's steps, timed around the real calls ----

STEPS: list[tuple[str, Any, str]] = [
    ("control requests (poll)", JobControl, "next_request"),
    ("plan source splits", TriggeredEpochs, "_plan_sources"),
    ("checkpoint details", run_start, "checkpoint_details"),
    ("build the epoch's DataFrame", EpochFrames, "frame_for"),
    ("Spark job (toArrow)", None, "toArrow"),  # the session's DataFrame class
    ("read acknowledgements", JobRun, "_read_messages"),
    ("complete checkpoint (metadata)", CheckpointCoordinator, "complete"),
    ("sink commit", CheckpointCoordinator, "commit"),
    ("retain checkpoints", CheckpointCoordinator, "retain"),
    ("status file write", run_end, "write_status"),
    ("plan next epoch's restores", JobRun, "restores_after"),
]


class DriverSplit:
    """Seconds spent in each driver step (STEPS) while ``active``; also the slowest
    subtask's own time (invoke to snapshot) of each completed checkpoint."""

    def __init__(self, frame_class: type) -> None:
        self.totals = dict.fromkeys((label for label, _, _ in STEPS), 0.0)
        self.slowest_task: list[float] = []
        self.active = True
        self.last_plan: Any = None
        self._patched: list[tuple[type, str, Any, bool]] = []
        for label, owner, name in STEPS:
            self._wrap(label, owner if owner is not None else frame_class, name)

    def _wrap(self, label: str, owner: type, name: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            raise BenchFailure(
                f"{owner.__module__}.{owner.__name__}.{name} is gone: update STEPS in "
                f"bench/epochs.py to the driver's current steps"
            )
        split = self
        keep_acks = name == "complete"
        keep_plan = name == "frame_for"

        def timed(*args: Any, **kwargs: Any) -> Any:
            if keep_plan:
                split.last_plan = args[1]
            started = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            finally:
                if split.active:
                    split.totals[label] += time.perf_counter() - started
            if keep_acks:  # the slowest subtask's own time in the checkpoint just completed
                times = [a.duration_seconds for a in result.acknowledgements]
                split.slowest_task.append(max(times, default=0.0))
            return result

        self._patched.append((owner, name, original, name in owner.__dict__))
        setattr(owner, name, timed)

    def remove(self) -> None:
        """Put every original method back."""
        for owner, name, original, own in reversed(self._patched):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)


# ---- 1. epoch overhead ----


TAGGED = pa.schema([("id", pa.int64()), ("event_time", pa.int64()), ("pid", pa.int64())])


def _identity(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch


def _tag_pid(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with the Python worker's process id (is the worker reused per epoch?)."""
    pid = pa.array(np.full(batch.num_rows, os.getpid(), dtype=np.int64))
    return pa.RecordBatch.from_arrays([batch.column(0), batch.column(1), pid], schema=TAGGED)


def overhead(spark: Any, scratch: str, epochs: int, rows: int, warmup: int) -> dict[str, Any]:
    """Run ``epochs`` trivial epochs, the baseline after each; per-epoch figures."""
    for _ in range(3):  # warm the baseline's path (JIT, Python workers) before timing
        baseline_job(spark)
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=f"{scratch}/overhead-chk"
    )
    out = f"{scratch}/overhead-out"
    stream = env.from_sequence(end=epochs * rows, rows_per_epoch=rows)
    stream.map_batch(_tag_pid, output_schema=TAGGED).sink_to(FileSink(out))
    split = DriverSplit(type(spark.range(1)))
    rows_seen: list[dict[str, Any]] = []
    marks = {"returned": 0.0}
    before: dict[str, float] = dict(split.totals)

    def progress(figures: dict[str, Any]) -> None:
        entered = time.perf_counter()
        split.active = False
        steps = {k: v - before[k] for k, v in split.totals.items()}
        before.update(split.totals)
        cycle = entered - marks["returned"] if marks["returned"] else float("nan")
        after = warm = float("nan")
        if not figures["final"]:
            after = baseline_job(spark)  # the first run after an epoch
            warm = baseline_job(spark)  # its workers are warm again
            figures = {**figures, "baseline_build": BUILD_SECONDS[-1]}
        rows_seen.append(
            {**figures, "cycle": cycle, "baseline": warm, "after": after, "steps": steps}
        )
        split.active = True
        marks["returned"] = time.perf_counter()

    try:
        result = env.execute("epochs", trigger=EpochTrigger.processing_time(0.0), progress=progress)
    finally:
        split.remove()
    if result.status != "FINISHED" or result.epochs != epochs:
        raise BenchFailure(f"the job ended {result.status} after {result.epochs} epochs")
    check_exactly_once(out, epochs * rows)
    for row, task in zip(rows_seen, split.slowest_task, strict=True):
        row["slowest_task"] = task
    steady = [r for r in rows_seen[warmup:] if not r["final"]]
    if len(steady) < 5:
        raise BenchFailure(f"only {len(steady)} steady epochs: raise --epochs")
    return {
        "steady": steady,
        "epochs": rows_seen,
        "per_task": {
            **per_task_costs(split.last_plan),
            "entry_points": worker_entry_point_scan(spark),
        },
        "fresh": fresh_workers(out),
    }


def fresh_workers(out: str) -> tuple[int, int]:
    """Epochs whose source subtasks ran in new Python processes only, of the epochs after
    the first (a reused worker keeps its pid)."""
    pids: dict[int, set[int]] = {}
    for name in os.listdir(out):
        found = PART_FILE.match(name)
        if found:
            column = pq.read_table(f"{out}/{name}", columns=["pid"]).column(0)
            pids.setdefault(int(found.group(1)), set()).update(column.to_pylist())
    seen: set[int] = set()
    fresh = 0
    for checkpoint_id in sorted(pids):
        fresh += bool(seen) and not pids[checkpoint_id] & seen
        seen |= pids[checkpoint_id]
    return fresh, len(pids) - 1


def per_task_costs(plan: Any, rounds: int = 20) -> dict[str, float]:
    """What every Spark task of an epoch repeats before flintlock's invoke, timed here in
    plain Python (median ms): unpickling its stage function (the plan rides in the
    closure), and building its plugin manager and registry."""
    function = StageFunction(plan, 0)
    pickled = cloudpickle.dumps(function)
    timings: dict[str, list[float]] = {"pickle": [], "unpickle": [], "plugins": []}
    for _ in range(rounds):
        started = time.perf_counter()
        cloudpickle.dumps(function)
        timings["pickle"].append(time.perf_counter() - started)
        started = time.perf_counter()
        cloudpickle.loads(pickled)
        timings["unpickle"].append(time.perf_counter() - started)
        started = time.perf_counter()
        build_registry(build_plugin_manager(plan.plugins))
        timings["plugins"].append(time.perf_counter() - started)
    costs = {k: statistics.median(v) * 1000 for k, v in timings.items()}
    return {**costs, "closure_kb": len(pickled) / 1024}


def _time_entry_point_scan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In a Python worker: what ``installed_plugins()`` costs a worker that has not run it."""
    from flintlock.core.hooks.manager import installed_plugins

    for _ in batches:
        pass
    installed_plugins.cache_clear()  # recomputed by the next task of this worker anyway
    started = time.perf_counter()
    installed_plugins()
    yield pa.RecordBatch.from_pydict({"seconds": [time.perf_counter() - started]})


def worker_entry_point_scan(spark: Any, runs: int = 3) -> float:
    """Median ms of the entry-point scan inside Spark's Python workers (their sys.path
    holds pyspark's and py4j's zip files, which importlib.metadata reads)."""
    seconds: list[float] = []
    for _ in range(runs):
        frame = spark.range(0, 2, 1, 2).mapInArrow(_time_entry_point_scan, "seconds double")
        seconds.extend(frame.toArrow().column(0).to_pylist())
    return statistics.median(seconds) * 1000


def check_exactly_once(out: str, total: int) -> pa.Table:
    """Every id in ``[0, total)`` exactly once in the committed files; the table."""
    table = pq.read_table(out)
    ids = np.sort(table.column("id").to_numpy())
    if len(ids) != total or not np.array_equal(ids, np.arange(total)):
        missing = total - len(np.unique(ids))
        raise BenchFailure(
            f"{out}: {len(ids)} rows committed for ids 0..{total - 1} "
            f"({missing} missing, {len(ids) - len(np.unique(ids))} duplicates)"
        )
    return table


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, linear interpolation."""
    return float(np.quantile(np.asarray(values, dtype=float), q))


def print_overhead(found: dict[str, Any]) -> None:
    """The overhead table, the ratio and the split of a cycle."""
    steady = found["steady"]
    cycle = [r["cycle"] for r in steady]
    seconds = [r["seconds"] for r in steady]
    base = [r["baseline"] for r in steady]
    print(f"\nEpoch overhead: {len(steady)} steady epochs (interleaved with the baseline)")
    print(f"{'':42}{'median s':>10}{'p90 s':>9}{'vs baseline':>13}")
    b50 = statistics.median(base)
    after = [r["after"] for r in steady]
    for name, values in [
        ("baseline: two-stage Spark job, exact exch.", base),
        ("  (its first run after an epoch)", after),
        ("epoch cycle (callback to callback)", cycle),
        ("epoch 'seconds' (progress figures)", seconds),
    ]:
        print(
            f"{name:<42}{statistics.median(values):>10.3f}{pct(values, 0.9):>9.3f}"
            f"{statistics.median(values) / b50:>12.2f}x"
        )
    ratio = statistics.median(cycle) / b50
    print(
        f"ratio (median epoch cycle / median baseline): {ratio:.2f}x; target <= 1.5x: "
        f"{'met' if ratio <= 1.5 else 'NOT met'}"
    )
    print("\nSplit of the epoch cycle (median per epoch; steps are driver-side):")
    step_medians = {k: statistics.median(r["steps"][k] for r in steady) for k in steady[0]["steps"]}
    covered = [sum(r["steps"].values()) for r in steady]
    for label, value in step_medians.items():
        print(f"  {label:<40}{value * 1000:>8.1f} ms")
    other = [c - s for c, s in zip(cycle, covered, strict=True)]
    print(f"  {'(rest of the driver loop)':<40}{statistics.median(other) * 1000:>8.1f} ms")
    task = statistics.median(r["slowest_task"] for r in steady)
    print(f"  inside the Spark job: slowest subtask, invoke to snapshot {task * 1000:.1f} ms")
    build = statistics.median(r["baseline_build"] for r in steady)
    print(f"  the baseline builds its DataFrame in {build * 1000:.1f} ms (inside its time)")
    spark_job = statistics.median(r["steps"]["Spark job (toArrow)"] for r in steady)
    action = statistics.median(r["baseline"] - r["baseline_build"] for r in steady)
    fresh, compared = found["fresh"]
    print(
        f"  source subtasks in new Python worker processes (pid never seen before) in "
        f"{fresh} of {compared} epochs"
    )
    costs = found["per_task"]
    print(
        f"  per Spark task, before invoke (timed in plain Python): stage function "
        f"{costs['closure_kb']:.0f} KB pickled, unpickling {costs['unpickle']:.1f} ms, "
        f"plugin manager and registry {costs['plugins']:.1f} ms"
    )
    print(
        f"  per new Python worker: flintlock's entry-point scan (installed_plugins) "
        f"{costs['entry_points']:.1f} ms, inside the worker"
    )
    print(
        f"  the epoch's Spark job minus the baseline's action (toArrow): "
        f"{(spark_job - action) * 1000:+.1f} ms; "
        f"driver work outside the Spark job: "
        f"{(statistics.median(cycle) - spark_job) * 1000:.1f} ms"
    )


def unread_input(spark: Any, runs: int) -> None:
    """Spark's side of worker reuse: the baseline vs the same job whose first stage
    leaves its partition's rows unread (as a source subtask of flintlock does)."""
    cases = {"reads its input": _route, "leaves its input unread": _route_unread}
    times: dict[str, list[float]] = {name: [] for name in cases}
    after: list[float] = []
    for _ in range(2):
        for first in cases.values():
            baseline_job(spark, first)
    for _ in range(runs):
        baseline_job(spark)  # warm workers for both cases
        for name, first in cases.items():
            times[name].append(baseline_job(spark, first))
        after.append(baseline_job(spark))  # right after the unread case
    print("\nWorker reuse: the baseline job, its first stage reading its input or not")
    for name, values in times.items():
        print(f"  first stage {name:<28} median {statistics.median(values):.3f} s")
    print(f"  the baseline right after the unread case   median {statistics.median(after):.3f} s")


# ---- 2. end-to-end latency ----


class OutputWatcher:
    """Polls a folder for committed part files; when each first appeared (time.time())."""

    def __init__(self, folder: str, every: float = 0.005) -> None:
        self.folder = folder
        self.every = every
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="output-watcher", daemon=True)

    def __enter__(self) -> OutputWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            try:
                names = os.listdir(self.folder)
            except FileNotFoundError:
                names = []
            for name in names:
                if name not in self.seen and PART_FILE.match(name):
                    self.seen[name] = now
            self._stop.wait(self.every)


def latency(spark: Any, scratch: str, rate: float, seconds: float) -> dict[str, Any]:
    """Rows at ``rate`` per second, 1 s trigger, for ``seconds``; per-row latency."""
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=f"{scratch}/latency-chk"
    )
    out = f"{scratch}/latency-out"
    env.from_sequence(rows_per_second=rate).map_batch(_identity).sink_to(FileSink(out))
    epochs: list[dict[str, Any]] = []
    with OutputWatcher(out) as watcher:
        client = env.execute_async(
            "latency", trigger=EpochTrigger.processing_time(1.0), progress=epochs.append
        )
        time.sleep(seconds)
        client.stop()
        result = client.result(60)
    if result.status != "STOPPED":
        raise BenchFailure(f"the latency job ended {result.status}, not STOPPED")
    table = check_exactly_once(out, int(pc.max(pq.read_table(out).column("id")).as_py()) + 1)
    if table.num_rows < rate * (seconds - 3):
        raise BenchFailure(f"only {table.num_rows} rows in {seconds} s at {rate} rows/s")
    kinds = {e["checkpoint_id"]: e for e in epochs}
    latencies, by_status, in_order = [], [], []
    for name, seen in watcher.seen.items():
        checkpoint_id = int(PART_FILE.match(name).group(1))  # type: ignore[union-attr]
        epoch = kinds.get(checkpoint_id)
        if epoch is None:
            raise BenchFailure(f"{name} belongs to no epoch the progress callback saw")
        times = pq.read_table(f"{out}/{name}", columns=["event_time"]).column(0).to_numpy()
        in_order.append((checkpoint_id, int(times.min()), int(times.max())))
        if epoch["kind"] != "checkpoint":
            continue  # the stop's savepoint epoch starts at once, not on the trigger
        latencies.extend((seen - times / 1000.0).tolist())
        by_status.extend((epoch["time"] - times / 1000.0).tolist())
    check_checkpoint_order(in_order)
    if not watcher.seen or len(latencies) < 100:
        raise BenchFailure(f"only {len(latencies)} rows measured: raise --seconds or --rate")
    if min(latencies) < 0:
        raise BenchFailure(f"a row was visible {-min(latencies):.3f} s before its event time")
    return {
        "latencies": latencies,
        "by_status": by_status,
        "epochs": epochs,
        "rows": table.num_rows,
    }


def check_checkpoint_order(files: list[tuple[int, int, int]]) -> None:
    """Rows of checkpoint N are all later (event time) than those of checkpoint N - 1."""
    spans: dict[int, tuple[int, int]] = {}
    for checkpoint_id, low, high in files:
        old = spans.get(checkpoint_id, (low, high))
        spans[checkpoint_id] = (min(old[0], low), max(old[1], high))
    ordered = sorted(spans.items())
    for (first, (_, high)), (second, (low, _)) in itertools.pairwise(ordered):
        if low < high:
            raise BenchFailure(f"checkpoint {second} holds rows older than checkpoint {first}")


def print_latency(found: dict[str, Any], rate: float) -> None:
    """p50 / p99 of the row latency, in seconds and in epochs (1 s trigger)."""
    values, status = found["latencies"], found["by_status"]
    epochs = [e for e in found["epochs"] if e["kind"] == "checkpoint"]
    run = [e["seconds"] for e in epochs]
    period = statistics.median(b["time"] - a["time"] for a, b in itertools.pairwise(epochs))
    print(
        f"\nEnd-to-end latency, {rate:g} rows/s, 1 s trigger: {len(values)} rows measured "
        f"({found['rows']} committed), {len(run)} epochs; epoch run median "
        f"{statistics.median(run):.3f} s, epoch period (start to start) median {period:.3f} s"
    )
    for name, v in [("part file visible (poll, 5 ms)", values), ("epoch recorded", status)]:
        p50, p99 = pct(v, 0.5), pct(v, 0.99)
        print(
            f"  {name:<32} p50 {p50:.3f} s  p99 {p99:.3f} s  max {max(v):.3f} s;  in "
            f"trigger intervals p50 {p50:.2f} p99 {p99:.2f}, in epoch periods "
            f"p50 {p50 / period:.2f} p99 {p99 / period:.2f}"
        )
    p99 = pct(values, 0.99)
    print(f"target p99 <= 2 epochs (2 s): {'met' if p99 <= 2.0 else 'NOT met'}")


# ---- the run ----


def start_spark() -> Any:
    """The benchmarks' quiet local[2] session (``timing.local_session``)."""
    return local_session()


def main() -> None:
    """Overhead, then latency; figures and checks printed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--rows-per-epoch", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3, help="first epochs left out")
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--skip", choices=["overhead", "latency", "reuse"], action="append")
    parser.add_argument("--reuse-runs", type=int, default=10)
    args = parser.parse_args()
    spark = start_spark()
    scratch = tempfile.mkdtemp(prefix="flintlock-epochs-")
    print(f"load average at start: {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    try:
        skip = args.skip or []
        if "overhead" not in skip:
            print_overhead(overhead(spark, scratch, args.epochs, args.rows_per_epoch, args.warmup))
        if "reuse" not in skip:
            unread_input(spark, args.reuse_runs)
        if "latency" not in skip:
            print_latency(latency(spark, scratch, args.rate, args.seconds), args.rate)
    except BenchFailure as failure:
        print(f"FAILED: {failure}")
        sys.exit(1)
    print(f"load average at end: {os.getloadavg()[0]:.2f}; output checked: every id exactly once")
    spark.stop()


if __name__ == "__main__":
    main()
