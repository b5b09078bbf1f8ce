"""Where a small job's fixed cost goes: W1 per batch over 1,000 rows, flintlock against raw
``mapInArrow`` doing the same pyarrow work, in one session, interleaved.

Prints each side's median seconds and its Spark job's (from Spark's event log: submission
to completion), then flintlock's driver-side steps per job (wall time, timed by wrapping
the driver's methods in this process): what the job costs beyond its Spark job.

Both sides read the same DataFrame object in every run unless ``--fresh-frame``: from the
second run on, flintlock checks its source count in the job's own query instead of
counting (``core/spark/source_partitions.py``); with a new frame per run it counts, as a
job in a new process does.

    python bench/fixed_cost.py [--runs 15] [--warmup 3] [--settle 0.4] [--fresh-frame]
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import w1
from pyspark import cloudpickle
from timing import local_session

from flintlock.core.checkpoint import coordinator
from flintlock.core.job import lease, master, run
from flintlock.core.spark import epoch_frames, source_partitions

cloudpickle.register_pickle_by_value(w1)  # workers cannot import examples/w1.py

STEPS: list[tuple[Any, str, str]] = [
    (master.JobMaster, "execute", "the job (JobMaster.execute)"),
    (run.JobRun, "run_epoch", "  its epoch (run_epoch)"),
    (epoch_frames.EpochFrames, "frame_for", "    build the epoch's DataFrame"),
    (run.JobRun, "_read_messages", "    read the acknowledgements"),
    (coordinator.CheckpointCoordinator, "complete", "    complete the checkpoint"),
    (run.JobRun, "__init__", "  plan the run (graph)"),
    (source_partitions, "partition_count", "    count the source's partitions"),
    (source_partitions, "planned_partitions", "    or check it in the epoch's query"),
    (run.JobRun, "commit_epoch", "  commit"),
    (lease.JobLease, "acquire", "  acquire the lease"),
    (lease.JobLease, "release", "  release the lease"),
]


def timed_steps(times: dict[str, list[float]]) -> None:
    """Wrap each step so that its wall time per call lands in ``times``."""
    for owner, name, label in STEPS:
        original = getattr(owner, name)

        def wrapper(
            *args: Any, _f: Callable[..., Any] = original, _l: str = label, **kwargs: Any
        ) -> Any:
            started = time.perf_counter()
            try:
                return _f(*args, **kwargs)
            finally:
                times[_l].append(time.perf_counter() - started)

        setattr(owner, name, wrapper)  # a module's function: found by its module's callers


def spark_job_ms(log_dir: str, application: str) -> dict[str, list[int]]:
    """Each job group's Spark job durations (ms) in the application's event log."""
    durations: dict[str, list[int]] = collections.defaultdict(list)
    started: dict[int, tuple[str, int]] = {}
    for path in glob.glob(f"{log_dir}/*{application}*/events*"):
        with open(path, encoding="utf-8") as log:
            for line in log:
                event = json.loads(line)
                if event["Event"] == "SparkListenerJobStart":
                    group = (event.get("Properties") or {}).get("spark.jobGroup.id") or ""
                    started[event["Job ID"]] = (group, event["Submission Time"])
                elif event["Event"] == "SparkListenerJobEnd" and event["Job ID"] in started:
                    group, at = started[event["Job ID"]]
                    kind = "flintlock" if group.startswith("flintlock:") else group
                    durations[kind].append(event["Completion Time"] - at)
    return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs of each side first")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds idle before each timed job, both sides (the JVM compiles code "
        "for a while after a job: back to back, each job pays the last one's tail)",
    )
    parser.add_argument(
        "--fresh-frame",
        action="store_true",
        help="a new input DataFrame before each timed job, both sides (made before the "
        "timer starts): flintlock counts its partitions, as a job in a new process does",
    )
    args = parser.parse_args()
    log_dir = tempfile.mkdtemp(prefix="flintlock-events-")
    os.environ["BENCH_SPARK_CONF"] = (
        f"spark.eventLog.enabled=true,spark.eventLog.dir=file://{log_dir},"
        "spark.eventLog.compress=false"
    )
    spark = local_session()
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    tiny = w1.w1_input(spark, 1_000, partitions=2)
    context = spark.sparkContext
    for _ in range(args.warmup):
        w1.raw_map_in_arrow_w1(tiny), w1.flintlock_w1(spark, tiny, 2, False, scratch)
    times: dict[str, list[float]] = collections.defaultdict(list)
    timed_steps(times)
    seconds: dict[str, list[float]] = {"raw": [], "flintlock": []}
    answers = set()
    for _ in range(args.runs):
        if args.fresh_frame:
            tiny = w1.w1_input(spark, 1_000, partitions=2)
        context.setJobGroup("raw", "raw mapInArrow")
        time.sleep(args.settle)
        started = time.perf_counter()
        count, total = w1.raw_map_in_arrow_w1(tiny)
        answers.add((count, round(total, 6)))
        seconds["raw"].append(time.perf_counter() - started)
        if args.fresh_frame:
            tiny = w1.w1_input(spark, 1_000, partitions=2)
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        time.sleep(args.settle)
        started = time.perf_counter()
        count, total = w1.flintlock_w1(spark, tiny, 2, False, scratch)
        answers.add((count, round(total, 6)))
        seconds["flintlock"].append(time.perf_counter() - started)
    application = context.applicationId
    spark.stop()
    jobs = spark_job_ms(log_dir, application)
    raw, flintlock = (statistics.median(seconds[k]) for k in ("raw", "flintlock"))
    print(
        f"W1 per batch over 1,000 rows, parallelism 2, local[2], {args.runs} interleaved "
        f"runs, {args.settle:g} s idle before each"
        + (", a new input DataFrame for each" if args.fresh_frame else "")
    )
    raw_job = statistics.median(jobs["raw"])
    print(f"raw mapInArrow   {raw * 1e3:7.1f} ms   its Spark job {raw_job:5.0f} ms")
    print(
        f"flintlock        {flintlock * 1e3:7.1f} ms   its Spark job "
        f"{statistics.median(jobs['flintlock']):5.0f} ms   {flintlock / raw:.2f}x raw"
    )
    print("flintlock's driver, ms per job (mean over the runs; - : the step did not run):")
    for _, _, label in STEPS:
        spent = f"{sum(times[label]) * 1e3 / args.runs:7.1f}" if times[label] else "      -"
        print(f"  {label:<38}{spent}")
    print("both agree" if len(answers) == 1 else f"MISMATCH: {answers}")


if __name__ == "__main__":
    main()
