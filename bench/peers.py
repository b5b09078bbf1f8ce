"""W1 per record in-process on one core: flintlock beside Bytewax, in the same run.

W1: rows (key, value) as dicts built from 10,000-row column batches -> map value*2 ->
filter key%2==0 -> count and sum, per record. flintlock runs its real one-input task in a
harness (``examples/w1.py: in_process_w1``); a plain CPython loop over the same dicts and
functions is the floor. Bytewax (``bytewax==0.21.1``) runs the same functions in its own
venv (made once under ``--cache``, default ``~/.cache/flintlock-bench``), in a subprocess
that times only its dataflow; if it cannot be installed, its column is skipped with a note.
Runs are interleaved; each figure is the median of ``--runs``; every answer is checked.

    python bench/peers.py [--rows 2000000] [--runs 5] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import venv
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import w1

BYTEWAX = "bytewax==0.21.1"
BATCH = 10_000

BYTEWAX_W1 = '''
import json, sys, time
from bytewax import operators as op
from bytewax.dataflow import Dataflow
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.testing import TestingSource, run_main

rows, batch = int(sys.argv[1]), int(sys.argv[2])
keys = [(i * 2654435761) % 10000 for i in range(rows)]
values = [(i % 1000) / 10.0 for i in range(rows)]

def records():
    """Dicts built from column batches, as flintlock builds its rows."""
    for start in range(0, rows, batch):
        for key, value in zip(keys[start:start + batch], values[start:start + batch]):
            yield {"key": key, "value": value}

def double_row(row):
    return {"key": row["key"], "value": row["value"] * 2.0}

def even_row(row):
    return row["key"] % 2 == 0

result = [0, 0.0]

class CountSum(StatelessSinkPartition):
    def write_batch(self, items):
        count, total = result
        for row in items:
            count += 1
            total += row["value"]
        result[:] = [count, total]

class CountSumSink(DynamicSink):
    def build(self, step_id, worker_index, worker_count):
        return CountSum()

flow = Dataflow("w1")
stream = op.input("in", flow, TestingSource(records(), batch_size=batch))
stream = op.filter("filter", op.map("map", stream, double_row), even_row)
op.output("out", stream, CountSumSink())
started = time.perf_counter()
run_main(flow)
print(json.dumps({"seconds": time.perf_counter() - started, "result": result}))
'''


def bytewax_python(cache: Path) -> Path | None:
    """The python of a venv with Bytewax (made on first use); None, with a note, if not."""
    home = cache / "bytewax-venv"
    python = home / "bin" / "python"
    if python.exists() and _has_bytewax(python):
        return python
    try:
        venv.create(home, with_pip=True, clear=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", BYTEWAX],
            check=True,
            capture_output=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        print(f"note: Bytewax column skipped: could not install {BYTEWAX} ({error})")
        if detail:
            print("  " + detail.decode(errors="replace").strip().splitlines()[-1])
        return None
    return python if _has_bytewax(python) else None


def _has_bytewax(python: Path) -> bool:
    return (
        subprocess.run([str(python), "-c", "import bytewax"], capture_output=True).returncode == 0
    )


def run_bytewax(python: Path, script: Path, rows: int) -> tuple[float, tuple[int, float]]:
    """One Bytewax run: its dataflow's own seconds and (count, sum)."""
    done = subprocess.run(
        [str(python), str(script), str(rows), str(BATCH)],
        check=True,
        capture_output=True,
        text=True,
    )
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return answer["seconds"], (answer["result"][0], answer["result"][1])


def main() -> None:
    """Time the variants interleaved and print one table of rec/s on one core."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "flintlock-bench")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    batches = w1.w1_arrow_input(args.rows).to_batches(max_chunksize=BATCH)
    variants = {
        "CPython loop, same functions (floor)": lambda: timed(lambda: w1.python_loop_w1(batches)),
        "flintlock per record": lambda: timed(lambda: w1.in_process_w1(batches)),
    }
    python = bytewax_python(args.cache)
    if python is not None:
        script = args.cache / "bytewax_w1.py"
        script.write_text(BYTEWAX_W1)
        variants["Bytewax 0.21.1 (1 worker)"] = lambda: run_bytewax(python, script, args.rows)
    for work in variants.values():
        work()  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    answers: dict[str, tuple[int, float]] = {}
    for _ in range(args.runs):
        for name, work in variants.items():
            took, answers[name] = work()
            seconds[name].append(took)
    print(f"W1 per record in-process, {args.rows:,} rows, one core, median of {args.runs}")
    print(f"{'variant':<40}{'seconds':>9}{'rec/s':>13}  result")
    for name, samples in seconds.items():
        median = statistics.median(samples)
        count, total = answers[name]
        print(
            f"{name:<40}{median:>9.3f}{args.rows / median:>13,.0f}  {count} rows, sum {total:.1f}"
        )
    agree = len({(c, round(t, 3)) for c, t in answers.values()}) == 1
    print("all variants agree" if agree else "MISMATCH")
    if python is not None:
        ratio = statistics.median(seconds["Bytewax 0.21.1 (1 worker)"]) / statistics.median(
            seconds["flintlock per record"]
        )
        print(f"flintlock per record / Bytewax throughput: {ratio:.2f}x")


def timed(work: Callable[[], tuple[int, float]]) -> tuple[float, tuple[int, float]]:
    """Seconds and answer of one in-process run."""
    started = time.perf_counter()
    answer = work()
    return time.perf_counter() - started, answer


if __name__ == "__main__":
    main()
