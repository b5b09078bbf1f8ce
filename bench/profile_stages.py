"""Where a flintlock source subtask and keyed exchange spend their time, beside raw Spark.

Runs bench/w2_spark.py's jobs (raw read, flintlock source, raw repartition(2, k),
flintlock source + key_by, W2 raw and flintlock) once each after a warm-up, and prints:

- per Spark stage, from Spark's own event log (``spark.eventLog.enabled``): tasks,
  summed executor run time, deserialize time, JVM GC time, shuffle bytes written/read;
- per job, from py-spy sampling every Python worker (``--subprocesses``, busy samples
  only): the share of worker time in each part of the task: Spark's Arrow I/O
  (pyspark serializers), routing/hashing, framing (IPC encode, message buffers),
  reading (message rows, IPC decode), the user's per-batch work and the rest.

    python bench/profile_stages.py [--rows 2000000] [--no-py-spy]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import w2_spark
from timing import local_session

# Ordered: the first pattern found in a sample's stack (innermost first) names its part.
PARTS = [
    ("routing/hashing", ("partitioners.py", "murmur.py", "key_groups.py", "api/keys.py")),
    (
        "framing (IPC, buffer)",
        ("messages.py:MessageBuffer", "messages.py:write_batch", "messages.py:encode", "_pieces"),
    ),
    ("coalescing", ("writer.py:MessageWriter.frame_pending",)),
    ("reading (rows, decode)", ("messages.py:decode", "messages.py:payload_buffers", "reader.py")),
    ("writer (per message)", ("writer.py",)),
    ("keyed state", ("core/state/",)),
    ("user function", ("state_functions.py", "w2_spark.py", "operators/", "sinks/")),
    ("Spark Arrow I/O", ("pyspark/sql/pandas/serializers.py", "pyspark/serializers.py")),
    ("pyspark worker", ("pyspark/worker.py", "pyspark/daemon.py")),
]


def classify(stack: list[str]) -> str:
    """The part of a task a sampled stack (outermost first) is in."""
    for frame in reversed(stack):
        for part, patterns in PARTS:
            if any(p in frame for p in patterns):
                return part
    return "other flintlock/runtime"


def py_spy_parts(raw: Path) -> collections.Counter[str]:
    """Busy samples of the Python workers per part (driver samples left out)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack_text, _, count = line.rpartition(" ")
        stack = stack_text.split(";")
        if sum(f.startswith("process ") for f in stack) < 3:
            continue  # the driver (driver -> JVM -> daemon -> worker for a worker's sample)
        frames = [_frame(f) for f in stack]
        counts[classify(frames)] += int(count)
    return counts


def _frame(text: str) -> str:
    """``function (path:line)`` as ``path:function``."""
    function, _, where = text.partition(" (")
    return f"{where.rsplit(':', 1)[0]}:{function}" if where else text


def stage_metrics(log_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Per bench variant (a job local property), its stages' summed task metrics."""
    variant_of_stage: dict[int, str] = {}
    stages: dict[int, dict[str, Any]] = {}
    for path in sorted(p for p in log_dir.rglob("events*") if p.is_file()):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                variant = (event.get("Properties") or {}).get("flintlock.bench.variant")
                for stage in event["Stage IDs"]:
                    variant_of_stage[stage] = variant
            elif kind == "SparkListenerTaskEnd" and event.get("Task Metrics"):
                metrics = event["Task Metrics"]
                row = stages.setdefault(event["Stage ID"], collections.Counter())
                row["tasks"] += 1
                row["run ms"] += metrics["Executor Run Time"]
                row["deserialize ms"] += metrics["Executor Deserialize Time"]
                row["gc ms"] += metrics["JVM GC Time"]
                row["shuffle write MB"] += metrics["Shuffle Write Metrics"]["Shuffle Bytes Written"]
                read = metrics["Shuffle Read Metrics"]
                row["shuffle read MB"] += read["Remote Bytes Read"] + read["Local Bytes Read"]
                row["result KB"] += metrics["Result Size"]
    out: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for stage, row in sorted(stages.items()):
        variant = variant_of_stage.get(stage)
        if variant is not None:
            out[variant].append({"stage": stage, **row})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--no-py-spy", action="store_true")
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="flintlock-eventlog-"))
    os.environ["BENCH_SPARK_CONF"] = (
        f"spark.eventLog.enabled=true,spark.eventLog.compress=false,spark.eventLog.dir={log_dir}"
    )
    spark = local_session(driver_memory="4g")
    frame = w2_spark.w2_input(spark, args.rows, args.keys)
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    counts, sums = "rows long", "i long, k long, total long"
    raw, ours = w2_spark.raw, w2_spark.flintlock
    jobs: dict[str, Callable[[], Any]] = {
        "raw read + count": lambda: raw(frame, False, w2_spark.count_partition, counts),
        "flintlock source + count": lambda: ours(spark, frame, scratch, "source"),
        "raw repartition + count": lambda: raw(frame, True, w2_spark.count_partition, counts),
        "flintlock key_by + count": lambda: ours(spark, frame, scratch, "key_by"),
        "raw repartition + dict loop": lambda: raw(frame, True, w2_spark.dict_loop_partition, sums),
        "flintlock key_by + BatchRunningSum": lambda: ours(spark, frame, scratch, "w2"),
    }
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not args.no_py_spy and not Path(py_spy).exists():
        print("py-spy is not installed (pip install 'flintlock[profile]'): stage metrics only")
        args.no_py_spy = True
    samples: dict[str, collections.Counter[str]] = {}
    seconds: dict[str, float] = {}
    for name, work in jobs.items():
        work()  # warm-up
        spark.sparkContext.setLocalProperty("flintlock.bench.variant", name)
        recorder = None
        raw_file = Path(scratch) / f"{len(samples)}.txt"
        if not args.no_py_spy:
            command = [py_spy, "record", "-s", "-r", "250", "-f", "raw", "--full-filenames"]
            command += ["-o", str(raw_file), "--pid", str(os.getpid())]
            recorder = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(1.0)  # py-spy attaches
        started = time.perf_counter()
        work()
        seconds[name] = time.perf_counter() - started
        spark.sparkContext.setLocalProperty("flintlock.bench.variant", None)
        if recorder is not None:
            recorder.send_signal(2)
            recorder.wait()
            samples[name] = py_spy_parts(raw_file)
    spark.stop()
    print(f"{args.rows:,} rows, {args.keys:,} keys, parallelism 2, local[2]; one run each")
    report(list(jobs), seconds, stage_metrics(log_dir), samples)


def report(
    jobs: list[str],
    seconds: dict[str, float],
    metrics: dict[str, list[dict[str, Any]]],
    samples: dict[str, collections.Counter[str]],
) -> None:
    """The two tables: Spark's stage metrics per job, py-spy's shares per job."""
    print("| job | wall s | stage | tasks | run ms | deser ms | gc ms | shuf w MB | shuf r MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in jobs:
        wall = f"{seconds[name]:.2f}" if name in seconds else "-"
        for row in metrics.get(name, []):
            print(
                f"| {name} | {wall} | {row['stage']} | {row['tasks']} | "
                f"{row['run ms']} | {row['deserialize ms']} | {row['gc ms']} | "
                f"{row['shuffle write MB'] / 1e6:.1f} | {row['shuffle read MB'] / 1e6:.1f} |"
            )
    if samples:
        parts = [p for p, _ in PARTS] + ["other flintlock/runtime"]
        print("\nPython workers, busy samples at 250/s (share of the job's worker samples):")
        print("| job | samples | " + " | ".join(parts) + " |")
        print("| --- | ---: |" + " ---: |" * len(parts))
        for name, counter in samples.items():
            total = sum(counter.values()) or 1
            shares = " | ".join(f"{100 * counter[p] / total:.0f}%" for p in parts)
            print(f"| {name} | {total} | {shares} |")


if __name__ == "__main__":
    main()
