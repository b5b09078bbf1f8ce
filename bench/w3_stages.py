"""Where W3b's window job spends its time on Spark, one-phase against two-phase (a
pre-aggregation before the keyed exchange), beside Spark SQL's groupBy(window).

Each job runs ``--runs`` times after a warm-up; Spark's event log gives per stage the
summed task metrics of the last run (run time, shuffle bytes), and py-spy (if installed)
where the Python workers spent that run, as bench/profile_stages.py prints them, with the
window operators split out; wall seconds are medians of the interleaved runs.

    python bench/w3_stages.py [--rows 2000000] [--keys 1000] [--runs 3] [--no-py-spy]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import profile_stages
import w3_spark
from profile_stages import py_spy_parts, report, stage_metrics
from timing import local_session

profile_stages.PARTS[:0] = [
    ("pre-aggregation", ("window_preaggregate.py",)),
    ("window operator", ("window_batch.py",)),
]


def recording(raw_file: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling this process and its Spark workers into ``raw_file`` (or None)."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        return None
    command = [py_spy, "record", "-s", "-r", "250", "-f", "raw", "--full-filenames"]
    command += ["-o", str(raw_file), "--pid", str(os.getpid())]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    return recorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-py-spy", action="store_true")
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="flintlock-eventlog-"))
    os.environ["BENCH_SPARK_CONF"] = (
        f"spark.eventLog.enabled=true,spark.eventLog.compress=false,spark.eventLog.dir={log_dir}"
    )
    spark = local_session(driver_memory="4g")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    frame = w3_spark.w3b_frame(spark, args.rows, args.keys)
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    jobs: dict[str, Callable[[], Any]] = {
        "Spark SQL groupBy(window)": lambda: w3_spark.spark_sql_counts(frame),
        "flintlock one-phase": lambda: w3_spark.flintlock_counts(spark, frame, scratch, False),
        "flintlock two-phase": lambda: w3_spark.flintlock_counts(spark, frame, scratch, True),
    }
    for work in jobs.values():
        work()  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in jobs}
    answers: dict[str, Any] = {}
    samples: dict[str, collections.Counter[str]] = {}
    for run in range(args.runs):
        for name, work in jobs.items():
            last = run == args.runs - 1
            spark.sparkContext.setLocalProperty("flintlock.bench.variant", name if last else None)
            raw_file = Path(scratch) / f"{len(samples)}.txt"
            recorder = recording(raw_file) if last and not args.no_py_spy else None
            started = time.perf_counter()
            answers[name] = work()
            seconds[name].append(time.perf_counter() - started)
            if recorder is not None:
                recorder.send_signal(signal.SIGINT)
                recorder.wait()
                samples[name] = py_spy_parts(raw_file)
    spark.sparkContext.setLocalProperty("flintlock.bench.variant", None)
    spark.stop()
    reference = w3_spark.counts(answers["Spark SQL groupBy(window)"])
    for name in ("flintlock one-phase", "flintlock two-phase"):
        assert w3_spark.counts(answers[name]) == reference, f"{name}: wrong counts"
    print(f"W3b: {args.rows:,} rows, {args.keys:,} keys, local[2]; answers equal Spark SQL's")
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    report(list(jobs), medians, stage_metrics(log_dir), samples)


if __name__ == "__main__":
    main()
