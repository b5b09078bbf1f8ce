"""Chaos test (issue 12): seeded random faults over the FileSink and the collect sink,
and every input row exactly once in the output, judged from outside.

One plan, drawn from the seed (``FLINTLOCK_CHAOS_SEED``, else random; printed): jobs
of random size, parallelism and shape, and faults placed at random in them — task
failures in map and keyed process functions, Python workers killed, sink writers failing
in write / finish / pre_commit, commits failing on the driver, the driver SIGKILLed
between checkpoint completion and commit, after the first committed file, right after
the final commit and after ``execute()`` returned — each once (a marker file). The jobs
run in order in driver processes (tests/spark/chaos_driver.py, ``local[2,4]`` so Spark
retries tasks), two chains of jobs side by side; the test also kills a driver's process
group at random moments, and starts a killed driver again until it returns. Then it
reads every committed Parquet output with pyarrow.dataset and every collected table
saved from the successful ``execute()``, and counts duplicates and losses by row id.
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from chaos_faults import DRIVER_KILLS, FUNCTION_FAULTS, WRITER_FAULTS, Fault

SCRIPT = Path(__file__).with_name("chaos_driver.py")
SEED_VARIABLE = "FLINTLOCK_CHAOS_SEED"
JOBS = 8
CHAINS = 2
"""Driver processes running side by side, each with every CHAINS-th job: Spark's start
and a job's waits leave a second core idle."""
RANDOM_KILLS = 3
EXTRA_FAULTS = 6
"""Faults drawn at random on top of one of each kind."""
KILL_WINDOW = 4.0
"""A job's duration in seconds, for timing random kills until one job has completed."""
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""For the drivers' JVMs: short lives, so no JIT compiler threads (halves Spark's start)."""
TASK_FAULTS_PER_JOB = 3
"""At most this many failures in one job's tasks: ``local[2,4]`` allows 3 per task."""
COMMIT_FAULTS_PER_JOB = 2
"""Each fails one ``execute()``; the driver allows a job 6."""
MAX_DRIVER_RUNS = 20
DRIVER_TIMEOUT = 300.0

REQUIRED = [
    ("files|collect", "kill_in_commit"),
    ("files|collect", "kill_in_post_commit"),
    ("files", "kill_mid_commit"),
    ("driver", "kill_after_execute"),
    ("process", "raise"),
    ("process", "worker_kill"),
    ("collect", "write"),
    ("collect", "finish"),
    ("collect", "pre_commit"),
    ("files", "write"),
    ("files", "finish"),
    ("files", "pre_commit"),
    ("map", "raise"),
    ("map", "worker_kill"),
    ("files", "commit"),
    ("collect", "commit"),
]
"""One of each fault kind at each place it can happen (``a|b``: at one, drawn at random),
the most constrained first, so that every seed finds a job for each."""
RANDOM_KINDS = [k for k in REQUIRED if k[1] not in DRIVER_KILLS and k[1] != "worker_kill"]
TASK_KINDS = {*FUNCTION_FAULTS, *WRITER_FAULTS}
"""Faults that fail a Spark task (the others happen on the driver)."""


def category(where: str, kind: str) -> str:
    """The summary's name for a fault."""
    if kind in DRIVER_KILLS:
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
    random_kills: list[tuple[str, float]]
    """(job whose start, or a later job's in its chain, arms the kill; fraction of a
    job's duration after that start)."""
    script: Path = SCRIPT
    """The driver script that runs a chain's jobs (tests/spark/sink_chaos_driver.py for
    the sink chaos suite)."""
    on_line: Callable[[str], None] | None = None
    """Called with each line a driver prints, as it comes (the Kafka chaos suite kills
    its broker after a given epoch)."""
    between_runs: Callable[[DriverRun], None] | None = None
    """Called after each driver run that did not return, before the next one starts (the
    Kafka chaos suite sends more records there)."""

    def chain(self, number: int) -> list[dict[str, Any]]:
        """The jobs one driver process runs, in order."""
        return self.jobs[number::CHAINS]

    def faults(self) -> list[Fault]:
        return [Fault.from_json(f) for job in self.jobs for f in job["faults"]]


def fits(job: dict[str, Any], where: str, kind: str) -> bool:
    """Whether a ``kind`` fault at ``where`` can happen in ``job`` and test what it means to."""
    sinks = job["sinks"]
    kinds = [f["kind"] for f in job["faults"]]
    if kind in DRIVER_KILLS and any(k in DRIVER_KILLS for k in kinds):
        return False  # one deterministic driver kill per job
    if kind in TASK_KINDS and sum(k in TASK_KINDS for k in kinds) >= TASK_FAULTS_PER_JOB:
        return False
    if kind == "commit" and kinds.count("commit") >= COMMIT_FAULTS_PER_JOB:
        return False
    if kind in ("kill_in_commit", "kill_in_post_commit"):
        return sinks == where  # the job's only 2PC sink: its commit is the commit
    if where == "driver":
        return sinks in ("files", "both")  # a re-run would duplicate the Parquet rows
    if where == "map":
        return True
    if where == "process":
        return job["keyed"]
    return sinks == where or sinks == "both"


def make_plan(seed: int, base: Path) -> Plan:
    """Jobs of random shape, one fault of each kind plus random extras placed in them."""
    rng = random.Random(seed)
    shapes = ["files", "files", "collect", "collect", "both", "both", "collect_api"]
    shapes += rng.choices(["files", "collect", "both", "collect_api"], k=JOBS - len(shapes))
    rng.shuffle(shapes)
    jobs = []
    for index, sinks in enumerate(shapes):
        jobs.append(
            {
                "name": f"chaos-{index:02d}",
                "first_id": index * 1_000_000,
                "rows": rng.randrange(2000, 4000, 100),
                "batch_size": rng.choice([200, 300, 400]),
                "parallelism": rng.choice([1, 2, 2, 3]),
                "keyed": sinks == "both" or rng.random() < 0.6,
                "sinks": sinks,
                "output": str(base / "out" / f"chaos-{index:02d}"),
                "faults": [],
            }
        )
    for number, (places, kind) in enumerate(REQUIRED):
        where = rng.choice(places.split("|"))
        if not any(fits(job, where, kind) for job in jobs):  # every such job has a kill
            where = next(other for other in places.split("|") if other != where)
        place_fault(rng, jobs, Fault(f"f{number:02d}-{where}-{kind}", where, kind))
    for number in range(len(REQUIRED), len(REQUIRED) + EXTRA_FAULTS):
        where, kind = rng.choice([k for k in RANDOM_KINDS if any(fits(j, *k) for j in jobs)])
        place_fault(rng, jobs, Fault(f"f{number:02d}-{where}-{kind}", where, kind))
    not_last = [job["name"] for job in jobs[: JOBS - CHAINS]]  # a kill is due before the end
    kills = [(name, round(rng.uniform(0.0, 1.2), 3)) for name in rng.sample(not_last, RANDOM_KILLS)]
    return Plan(seed, base, jobs, sorted(kills))


def place_fault(rng: random.Random, jobs: list[dict[str, Any]], fault: Fault) -> None:
    """Put ``fault`` in a random job where it fits, firing at a random call."""
    job = rng.choice([job for job in jobs if fits(job, fault.where, fault.kind)])
    if fault.where in ("map", "process"):  # some subtask always reaches that record
        at = rng.randint(1, job["rows"] // (4 * job["parallelism"]))
    else:  # a sink subtask may write one batch only: the exchange gathers its input
        at = 1
    job["faults"].append(Fault(fault.id, fault.where, fault.kind, at).to_json())


@dataclass
class DriverRun:
    """One driver process: how it ended and what it printed."""

    label: str
    returncode: int
    killed_by_test: bool
    stdout: list[tuple[float, str]]
    """Each line with the seconds since the process started."""
    stderr_path: Path
    result: dict[str, Any] | None = None

    def tail(self) -> str:
        stdout = "\n".join(f"+{at:.1f}s {text}" for at, text in self.stdout[-30:])
        return f"{stdout}\n--- stderr ---\n{self.stderr_path.read_text()[-4000:]}"


def run_driver(
    plan: Plan, label: str, jobs: list[dict[str, Any]], kill: tuple[str, float] | None
) -> DriverRun:
    """Start the driver in a session of its own; SIGKILL its group if ``kill`` comes due.

    ``kill`` is (job, seconds): due that long after that job, or a later one, starts.
    """
    plan_path = plan.base / f"plan-{label}.json"
    plan_path.write_text(json.dumps({"base": str(plan.base), "jobs": jobs}, indent=1))
    stderr_path = plan.base / f"driver-{label}.stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(plan.script), str(plan_path)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=plan.script.parent,
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
    order = [job["name"] for job in jobs]
    timer: threading.Timer | None = None
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append((time.perf_counter() - started, line.rstrip("\n")))
        if plan.on_line is not None:
            plan.on_line(line.rstrip("\n"))
        word = line.split()
        armed = kill is not None and timer is None and word[:1] == ["START"]
        if armed and order.index(word[1]) >= order.index(kill[0]):
            timer = threading.Timer(kill[1], kill_group, (killed,))
            timer.start()
    returncode = process.wait()
    lines.append((time.perf_counter() - started, f"exit {returncode}"))
    watchdog.cancel()
    if timer is not None:
        timer.cancel()
    with contextlib.suppress(ProcessLookupError):  # nothing of the group stays behind
        os.killpg(process.pid, signal.SIGKILL)
    run = DriverRun(label, returncode, killed.is_set(), lines, stderr_path)
    assert not hung.is_set(), (
        f"chaos seed={plan.seed}: driver {label} hung for {DRIVER_TIMEOUT:.0f} s\n{run.tail()}"
    )
    results = [text for _, text in lines if text.startswith("RESULT ")]
    if returncode == 0 and results:
        run.result = json.loads(results[-1].removeprefix("RESULT "))
    return run


def job_seconds(runs: list[DriverRun]) -> list[float]:
    """How long each job that completed took, START to DONE."""
    seconds = []
    for run in runs:
        starts = {}
        for at, text in run.stdout:
            word = text.split()
            if word[:1] == ["START"]:
                starts[word[1]] = at
            elif word[:1] == ["DONE"] and word[1] in starts:
                seconds.append(at - starts[word[1]])
    return seconds


def run_chain(plan: Plan, number: int) -> list[DriverRun]:
    """Run one chain's driver, killing it at the plan's random moments, until it returns.

    A random kill is due a drawn fraction of a typical job's duration (the median so
    far) after its job starts, so it lands anywhere in a job on a fast or a slow machine.
    """
    jobs = plan.chain(number)
    kills = [kill for kill in plan.random_kills if kill[0] in {job["name"] for job in jobs}]
    runs: list[DriverRun] = []
    for attempt in range(MAX_DRIVER_RUNS):
        kill = None
        if kills:
            typical = statistics.median(job_seconds(runs) or [KILL_WINDOW])
            kill = (kills[0][0], kills[0][1] * typical)
        run = run_driver(plan, f"{number}.{attempt}", jobs, kill)
        runs.append(run)
        with (plan.base / f"timeline-{number}.txt").open("a") as timeline:
            timeline.writelines(f"{run.label} +{at:.1f}s {text}\n" for at, text in run.stdout)
        if run.killed_by_test:
            kills.pop(0)
        if run.result is not None:
            return runs
        assert run.returncode == -signal.SIGKILL, (
            f"chaos seed={plan.seed}: driver {run.label} ended with {run.returncode}, "
            f"not by a kill\n{run.tail()}"
        )
        if plan.between_runs is not None:
            plan.between_runs(run)
    pytest.fail(f"chaos seed={plan.seed}: chain {number} did not return in {MAX_DRIVER_RUNS} runs")


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
        has_rows = "id" in table.column_names and "v" in table.column_names
        ids = table.column("id").to_pylist() if has_rows else []
        counts = Counter(ids)
        duplicates = sum(n - 1 for n in counts.values()) + sum(1 for i in ids if i not in expected)
        losses = sum(1 for i in expected if i not in counts)
        values = table.column("v").to_pylist() if has_rows else []
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
            table = pa.table({})
            if Path(job["output"]).exists():
                table = ds.dataset(job["output"], format="parquet").to_table()
            check.table(f"{label} parquet", table, job["first_id"], job["rows"])
        if job["sinks"] in ("collect", "both", "collect_api"):
            path = plan.base / "collected" / f"{job['name']}.arrow"
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_file(source).read_all()
            check.table(f"{label} collected", table, job["first_id"], job["rows"])
    return check


def staging_left(base: Path) -> list[str]:
    """Staged files still on disk: FileSink ``_staging-*`` folders, collect sink staging."""
    left = [*base.glob("out/*/_staging-*/*"), *base.glob("chk/*/collect-staging/**/*.arrow")]
    return sorted(str(path.relative_to(base)) for path in left)


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
    started = time.perf_counter()

    with ThreadPoolExecutor(CHAINS) as pool:
        chains = list(pool.map(lambda number: run_chain(plan, number), range(CHAINS)))

    seconds = time.perf_counter() - started
    runs = [run for chain in chains for run in chain]
    fired = set(os.listdir(tmp_path / "markers"))
    missing = [fault.id for fault in plan.faults() if fault.id not in fired]
    assert not missing, f"chaos seed={seed}: planned faults that never fired: {missing}"
    tally = Counter(category(fault.where, fault.kind) for fault in plan.faults())
    tally["driver kills"] += sum(run.killed_by_test for run in runs)
    faults = sum(tally.values())
    check = check_outputs(plan)
    left = staging_left(tmp_path)
    kinds = ", ".join(f"{n} {name}" for name, n in tally.most_common())
    summary = (
        f"chaos seed={seed}: {len(runs)} driver runs, {faults} faults ({kinds}), "
        f"{check.duplicates} duplicates, {check.losses} losses, "
        f"{check.rows_checked:,} rows checked in {seconds:.0f} s"
    )
    with capsys.disabled():
        print(summary)
    detail = "\n  ".join([summary, *check.problems])
    assert check.duplicates == 0 and check.losses == 0 and check.altered == 0, detail
    assert not left, f"{summary}\n  staged files left after the jobs returned: {left}"
    assert faults >= 20, detail


def test_every_seed_plans_each_fault_once_within_the_retry_budgets(tmp_path: Path) -> None:
    for seed in range(300):
        plan = make_plan(seed, tmp_path)
        planned = Counter((f.where, f.kind) for f in plan.faults())
        for places, kind in REQUIRED:
            assert sum(planned[(where, kind)] for where in places.split("|")) >= 1, (seed, kind)
        assert len(plan.faults()) + RANDOM_KILLS >= 20
        for job in plan.jobs:
            kinds = [f["kind"] for f in job["faults"]]
            assert sum(k in TASK_KINDS for k in kinds) <= TASK_FAULTS_PER_JOB, (seed, job)
            assert kinds.count("commit") <= COMMIT_FAULTS_PER_JOB, (seed, job)
            assert sum(k in DRIVER_KILLS for k in kinds) <= 1, (seed, job)
