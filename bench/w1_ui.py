"""Benchmark W1 with the live page on (``execute(ui_port=...)``, a page polling it each
second as a browser does) against off, in the same run (issue 38).

W1 per batch (map value*2 -> filter key%2==0 -> count and sum, parallelism 2, local[2])
over the same input DataFrame, as ``bench/w1_progress.py`` runs it, progress off. "ui on"
serves the job's page from the driver and a poller thread in this process asks for
``/api/jobs`` and the job's ``/api/jobs/{name}`` every second, as the page does (in the
driver's process: a browser elsewhere would cost the driver less). Rounds of both, in a
rotated order after a warm-up; prints each variant's median seconds and its time over
"ui off"'s in the same round (median and quartiles of the ratios).

    python bench/w1_ui.py [--rows 10000000] [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import w1
from pyspark import cloudpickle
from timing import local_session, rotated_rounds

from flintlock import StreamExecutionEnvironment

cloudpickle.register_pickle_by_value(w1)  # workers cannot import examples/w1.py


def run_w1(spark: Any, frame: Any, scratch: str, ui_port: int | None) -> tuple[int, float]:
    """W1 per batch as a new job; (count, sum)."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=scratch)
    stream = env.from_dataframe(frame).map_batch(w1.double_value).filter_batch(w1.even_key)
    sink = env.registry.get("sink", "collect")(name="out", schema=w1.RESULT_SCHEMA)
    stream.transform("count_sum", w1.CountSum).sink_to(sink, name="out")
    result = env.execute(f"w1-ui-{uuid.uuid4().hex[:8]}", progress=False, ui_port=ui_port)
    table = result.collected["out"]
    return sum(table.column("count").to_pylist()), sum(table.column("sum").to_pylist())


class Poller:
    """Asks the page's server what the page asks, every second, until stopped."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/jobs"
        self.answers = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.poll, daemon=True)

    def poll(self) -> None:
        while not self.stopped.wait(1.0):
            try:
                with urllib.request.urlopen(self.base, timeout=10) as answer:
                    jobs = json.loads(answer.read())["jobs"]
                for job in jobs:
                    name = urllib.parse.quote(job["job_name"])
                    with urllib.request.urlopen(f"{self.base}/{name}", timeout=10) as answer:
                        answer.read()
                self.answers += 1
            except OSError:
                pass  # before the first job started its page


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    spark = local_session(driver_memory="4g")
    frame = w1.w1_input(spark, args.rows, partitions=2)
    scratch = tempfile.mkdtemp(prefix="flintlock-bench-")
    port = free_port()
    poller = Poller(port)
    poller.thread.start()
    variants = {
        "ui off": lambda: run_w1(spark, frame, scratch, None),
        "ui on, page polling": lambda: run_w1(spark, frame, scratch, port),
    }
    for _ in range(2):  # warm-up: the JVM's JIT, Python workers, imports, the server
        for work in variants.values():
            work()
    seconds, answers = rotated_rounds(args.runs, variants)
    poller.stopped.set()
    off = seconds["ui off"]
    print(f"W1 per batch, {args.rows:,} rows, parallelism 2, local[2], {args.runs} rounds")
    print(f"{'variant':<22}{'median':>9}  / ui off, same round: median [quartiles]")
    for name, runs in seconds.items():
        ratios = sorted(r / o for r, o in zip(runs, off, strict=True))
        low, mid, high = statistics.quantiles(ratios, n=4)
        count, total = answers[name]
        print(
            f"{name:<22}{statistics.median(runs):>8.2f}s  {mid:.3f}x [{low:.3f}, {high:.3f}]"
            f"   {count} rows, sum {total:.1f}"
        )
    print(f"the poller got {poller.answers} answers from the page's server")
    print("both variants agree" if len(set(answers.values())) == 1 else "MISMATCH")
    spark.stop()


if __name__ == "__main__":
    main()
