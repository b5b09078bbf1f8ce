"""Chaos test (issue 12): seeded random faults over the FileSink and the collect sink,
and every input row exactly once in the output, judged from outside.

One plan, drawn from the seed (``FLINTLOCK_CHAOS_SEED``, else random; printed): jobs
of random size, parallelism and shape, and faults placed at random in them — task
failures in map and keyed process functions, Python workers killed, sink writers failing
in write / finish / pre_commit, commits failing on the driver, the driver SIGKILLed
between checkpoint completion and commit, after the first committed file, right after
the final commit and after ``execute()`` returned — each once (a marker file). The jobs
run in order in a driver process (tests/spark/chaos_driver.py, ``local[2,4]`` so Spark
retries tasks); the test also kills that process's group at random moments and starts it
again until it returns. Then it reads every committed Parquet output with
pyarrow.dataset and every collected table saved from the successful ``execute()``, and
counts duplicates and losses by row id.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from chaos_faults import Fault

SCRIPT = Path(__file__).with_name("chaos_driver.py")
SEED_VARIABLE = "FLINTLOCK_CHAOS_SEED"
JOBS = 8
RANDOM_KILLS = 3
EXTRA_FAULTS = 6
"""Faults drawn at random on top of one of each kind."""
KILL_WINDOW = 4.0
"""A job's duration in seconds, for timing random kills until one job has completed."""
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""For the drivers' JVMs: short lives, so no JIT compiler threads (halves Spark's start)."""
TASK_FAULTS_PER_JOB = 3
"""At most this many failures in one job's tasks: ``local[2,4]`` allows 3 per task."""
MAX_DRIVER_RUNS = 20
DRIVER_TIMEOUT = 300.0

REQUIRED = [
    ("map", "raise"),
    ("process", "raise"),
    ("map", "worker_kill"),
    ("process", "worker_kill"),
    ("files", "write"),
    ("files", "finish"),
    ("files", "pre_commit"),
    ("collect", "write"),
    ("collect", "finish"),
    ("collect", "pre_commit"),
    ("files", "commit"),
    ("collect", "commit"),
    ("files|collect", "kill_in_commit"),
    ("files", "kill_mid_commit"),
    ("files|collect", "kill_in_post_commit"),
    ("driver", "kill_after_execute"),
]
"""One of each fault kind at each place it can happen (``a|b``: at one, drawn at random)."""
RANDOM_KINDS = [k for k in REQUIRED if not k[1].startswith("kill_") and k[1] != "worker_kill"]


def category(where: str, kind: str) -> str:
    """The summary's name for a fault."""
    if kind.startswith("kill_"):
        return "driver kills"
    if kind == "worker_kill":
        return "worker kills"
    if kind == "commit":
        return "commit failures"
    if where in ("map", "process"):
        return "task failures"
    return "sink writer failures"


@dataclass
class Plan:
    """What one seed runs: the jobs (as chaos_driver.py reads them) and the random kills."""

    seed: int
    base: Path
    jobs: list[dict[str, Any]]
    random_kills: list[tuple[int, float]]
    """(index of the first job whose start arms the kill, fraction of a job's duration)."""

    def faults(self) -> list[tuple[str, Fault]]:
        return [(job["name"], Fault.from_json(f)) for job in self.jobs for f in job["faults"]]

    def write(self) -> Path:
        path = self.base / "plan.json"
        path.write_text(json.dumps({"base": str(self.base), "jobs": self.jobs}, indent=1))
        return path


def fits(job: dict[str, Any], where: str, kind: str) -> bool:
    """Whether a ``kind`` fault at ``where`` can happen in ``job`` and test what it means to."""
    sinks = job["sinks"]
    if kind.startswith("kill_") and any(f["kind"].startswith("kill_") for f in job["faults"]):
        return False  # one deterministic driver kill per job
    if kind in ("kill_in_commit", "kill_in_post_commit"):
        return sinks == where  # the job's only 2PC sink: its commit is the commit
    if where == "driver":
        return sinks in ("files", "both")  # a re-run would duplicate the Parquet rows
    if where == "map":
        return True
    if where == "process":
        return job["keyed"]
    return sinks == where or sinks == "both"


TASK_KINDS = {"raise", "worker_kill", "write", "finish", "pre_commit"}
"""Faults that fail a Spark task (the others happen on the driver)."""


def task_faults(job: dict[str, Any]) -> int:
    return sum(1 for f in job["faults"] if f["kind"] in TASK_KINDS)


def make_plan(seed: int, base: Path) -> Plan:
    """Jobs of random shape, one fault of each kind plus random extras placed in them."""
    rng = random.Random(seed)
    shapes = ["files", "files", "collect", "collect", "both", "both", "collect_api"]
    shapes += rng.choices(["files", "collect", "both", "collect_api"], k=JOBS - len(shapes))
    rng.shuffle(shapes)
    jobs = []
    first_id = 0
    for index, sinks in enumerate(shapes):
        rows = rng.randrange(2000, 4000, 100)
        jobs.append(
            {
                "name": f"chaos-{index:02d}",
                "first_id": first_id,
                "rows": rows,
                "batch_size": rng.choice([200, 300, 400]),
                "parallelism": rng.choice([1, 2, 2, 3]),
                "keyed": sinks == "both" or rng.random() < 0.6,
                "sinks": sinks,
                "output": str(base / "out" / f"chaos-{index:02d}"),
                "faults": [],
            }
        )
        first_id += 1_000_000
    wanted = list(REQUIRED) + rng.choices(RANDOM_KINDS, k=EXTRA_FAULTS)
    for number, (places, kind) in enumerate(wanted):
        where = rng.choice(places.split("|"))
        candidates = [
            job
            for job in jobs
            if fits(job, where, kind)
            and (kind not in TASK_KINDS or task_faults(job) < TASK_FAULTS_PER_JOB)
        ]
        assert candidates, f"seed={seed}: no job can take a {kind} fault in {where}"
        job = rng.choice(candidates)
        at = at_for(rng, job, where, kind)
        job["faults"].append(Fault(f"f{number:02d}-{where}-{kind}", where, kind, at).to_json())
    firsts = sorted(rng.sample(range(JOBS - 2), RANDOM_KILLS))
    kills = [(first, round(rng.uniform(0.0, 1.2), 3)) for first in firsts]
    return Plan(seed, base, jobs, kills)


def at_for(rng: random.Random, job: dict[str, Any], where: str, kind: str) -> int:
    """The call a fault fires at, low enough that some subtask always reaches it."""
    if where in ("map", "process"):
        return rng.randint(1, job["rows"] // (4 * job["parallelism"]))
    if kind == "write":
        return rng.randint(1, 2)
    return 1


@dataclass
class DriverRun:
    """One driver process: how it ended and what it printed."""

    returncode: int
    killed_by_test: bool
    stdout: list[tuple[float, str]]
    """Each line with the seconds since the process started."""
    stderr_path: Path
    result: dict[str, Any] | None = None

    def tail(self) -> str:
        stdout = "\n".join(f"+{at:.1f}s {text}" for at, text in self.stdout[-30:])
        return f"{stdout}\n--- stderr ---\n{self.stderr_path.read_text()[-4000:]}"


def run_driver(plan: Plan, number: int, kill: tuple[int, float] | None) -> DriverRun:
    """Start the driver in a session of its own; SIGKILL its group if ``kill`` comes due.

    ``kill`` is (job index, seconds): due that long after the first job at or past the
    index starts.
    """
    stderr_path = plan.base / f"driver-{number}.stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(plan.base / "plan.json")],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=SCRIPT.parent,
            env={**os.environ, "JDK_JAVA_OPTIONS": JAVA_OPTIONS},
            start_new_session=True,
        )
    started = time.perf_counter()
    killed, hung = threading.Event(), threading.Event()

    def kill_group(flag: threading.Event) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
                flag.set()

    watchdog = threading.Timer(DRIVER_TIMEOUT, kill_group, (hung,))
    watchdog.start()
    names = [job["name"] for job in plan.jobs]
    timer: threading.Timer | None = None
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append((time.perf_counter() - started, line.rstrip("\n")))
        word = line.split()
        armed = kill is not None and timer is None and word[:1] == ["START"]
        if armed and names.index(word[1]) >= kill[0]:
            timer = threading.Timer(kill[1], kill_group, (killed,))
            timer.start()
    returncode = process.wait()
    lines.append((time.perf_counter() - started, f"exit {returncode}"))
    watchdog.cancel()
    if timer is not None:
        timer.cancel()
    reap_group(process.pid)
    run = DriverRun(returncode, killed.is_set(), lines, stderr_path)
    assert not hung.is_set(), (
        f"chaos seed={plan.seed}: driver run {number} hung for {DRIVER_TIMEOUT:.0f} s\n"
        + run.tail()
    )
    results = [text for _, text in lines if text.startswith("RESULT ")]
    if returncode == 0 and results:
        run.result = json.loads(results[-1].removeprefix("RESULT "))
    return run


def reap_group(group: int) -> None:
    """Leave nothing of a driver's process group behind (its JVM, its Python workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


@dataclass
class Runs:
    """The driver runs of one plan, until one returned."""

    runs: list[DriverRun] = field(default_factory=list)
    random_kills: int = 0
    seconds: float = 0.0

    def job_seconds(self) -> list[float]:
        """How long each job that completed took, START to DONE."""
        seconds = []
        for run in self.runs:
            starts = {}
            for at, text in run.stdout:
                word = text.split()
                if word[:1] == ["START"]:
                    starts[word[1]] = at
                elif word[:1] == ["DONE"] and word[1] in starts:
                    seconds.append(at - starts[word[1]])
        return seconds


def run_until_returned(plan: Plan) -> Runs:
    """Run the driver, killing it at the plan's random moments, until it returns.

    A random kill is due a drawn fraction of a typical job's duration (the median so
    far) after its job starts, so it lands anywhere in a job on a fast or a slow machine.
    """
    started = time.perf_counter()
    outcome = Runs()
    kills = list(plan.random_kills)
    for number in range(MAX_DRIVER_RUNS):
        kill = None
        if kills:
            typical = statistics.median(outcome.job_seconds() or [KILL_WINDOW])
            kill = (kills[0][0], kills[0][1] * typical)
        run = run_driver(plan, number, kill)
        outcome.runs.append(run)
        with (plan.base / "timeline.txt").open("a") as timeline:
            timeline.writelines(f"run {number} +{at:.1f}s {text}\n" for at, text in run.stdout)
        if run.killed_by_test:
            outcome.random_kills += 1
            kills.pop(0)
        if run.result is not None:
            break
        assert run.returncode == -signal.SIGKILL, (
            f"chaos seed={plan.seed}: driver run {number} ended with {run.returncode}, "
            f"not by a kill\n{run.tail()}"
        )
    else:
        pytest.fail(f"chaos seed={plan.seed}: no driver run returned in {MAX_DRIVER_RUNS}")
    outcome.seconds = time.perf_counter() - started
    return outcome


@dataclass
class Check:
    """Duplicates and losses by row id over every output of every job."""

    duplicates: int = 0
    losses: int = 0
    altered: int = 0
    rows_checked: int = 0
    problems: list[str] = field(default_factory=list)

    def table(self, label: str, table: pa.Table, first_id: int, rows: int) -> None:
        """Count one output table against the job's input ids ``first_id ..+ rows``."""
        expected = range(first_id, first_id + rows)
        ids = table.column("id").to_pylist() if table.num_rows else []
        counts = Counter(ids)
        duplicates = sum(n - 1 for n in counts.values()) + sum(1 for i in ids if i not in expected)
        losses = sum(1 for i in expected if i not in counts)
        altered = 0
        if table.num_rows:
            values = table.column("v").to_pylist()
            altered = sum(1 for i, v in zip(ids, values, strict=True) if v != f"row-{i}")
        self.duplicates += duplicates
        self.losses += losses
        self.altered += altered
        self.rows_checked += rows
        if duplicates or losses or altered:
            self.problems.append(
                f"{label}: {duplicates} duplicates, {losses} losses, {altered} altered "
                f"of {rows} rows"
            )


def check_outputs(plan: Plan) -> Check:
    """Read every job's committed Parquet and collected table; count against its input."""
    check = Check()
    for job in plan.jobs:
        faults = ", ".join(f"{f['kind']}@{f['where']}" for f in job["faults"]) or "no faults"
        label = f"{job['name']} ({job['sinks']}, p={job['parallelism']}, {faults})"
        if job["sinks"] in ("files", "both"):
            table = ds.dataset(job["output"], format="parquet").to_table()
            check.table(f"{label} parquet", table, job["first_id"], job["rows"])
        if job["sinks"] in ("collect", "both", "collect_api"):
            path = plan.base / "collected" / f"{job['name']}.arrow"
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_file(source).read_all()
            check.table(f"{label} collected", table, job["first_id"], job["rows"])
    return check


def chaos_seed() -> int:
    """The seed from FLINTLOCK_CHAOS_SEED, or a fresh random one."""
    given = os.environ.get(SEED_VARIABLE)
    return int(given) if given else random.SystemRandom().randrange(2**31)


def test_every_row_exactly_once_under_random_faults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = chaos_seed()
    with capsys.disabled():
        print(f"\nchaos seed={seed} (set {SEED_VARIABLE}={seed} to run this plan again)")
    plan = make_plan(seed, tmp_path)
    plan.write()

    runs = run_until_returned(plan)

    fired = set(os.listdir(tmp_path / "markers"))
    planned = plan.faults()
    missing = [f.id for _, f in planned if f.id not in fired]
    assert not missing, f"chaos seed={seed}: planned faults that never fired: {missing}"
    tally = Counter(category(f.where, f.kind) for _, f in planned)
    tally["driver kills"] += runs.random_kills
    faults = sum(tally.values())
    check = check_outputs(plan)
    kinds = ", ".join(f"{n} {name}" for name, n in tally.most_common())
    summary = (
        f"chaos seed={seed}: {len(runs.runs)} driver runs, {faults} faults ({kinds}), "
        f"{check.duplicates} duplicates, {check.losses} losses, "
        f"{check.rows_checked:,} rows checked in {runs.seconds:.0f} s"
    )
    with capsys.disabled():
        print(summary)
    detail = "\n  ".join([summary, *check.problems])
    assert check.duplicates == 0 and check.losses == 0 and check.altered == 0, detail
    assert faults >= 20, detail
