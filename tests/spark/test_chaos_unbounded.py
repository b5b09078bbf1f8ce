"""Chaos test of unbounded jobs: seeded random faults across epochs, stops and savepoints,
and every row of every sequence exactly once in the committed output, judged from outside.

One plan, drawn from the seed (``FLINTLOCK_CHAOS_SEED``, else random; printed):
unbounded jobs (``from_sequence(end=..., rows_per_epoch=...)`` -> map -> keyed process
-> FileSink, tests/spark/chaos_unbounded_driver.py) of random size, epoch size and
parallelism, and faults placed at random epochs in them, each once (a marker file): task
failures in map and keyed process functions, Python workers killed, sink writers failing
in write / finish / pre_commit, commits failing on the driver (before any file is
published, or after the first of several), and the driver SIGKILLed between epochs,
between a checkpoint's completion and its commit, after the first file of a commit,
after the commit before it is recorded, and after ``execute()`` returned FINISHED.

The test sends each job stop and savepoint requests at random epochs
(``flintlock stop|savepoint`` or ``JobClient(...).stop()|savepoint()``); faults kill the
driver while the savepoints of one stop and of one savepoint request are committed, and
the test kills it while a third request is pending; it also kills drivers at random
moments of random epochs. Two driver chains run side by side (``local[2,4]`` each, so
Spark retries tasks); a killed driver is started again on the same job names and
checkpoint directory until every job has FINISHED; a stopped job is started again at
once and continues from its savepoint. First, both chains' drivers start the same twin
job together (same job name, same checkpoint directory): exactly one may run it, the
other must be refused (a JobLeaseError).

Each seed also pauses one driver right after its lease check for a random checkpoint of
a random job (``FLINTLOCK_PAUSE_AT``: it stops itself before it publishes), starts a
successor once the paused driver's lease expired, and resumes the paused one after the
successor committed an epoch of that job: the stale driver must stop with a lease error,
having published nothing. After the first driver kill, the test damages the newest
generation of the killed job's lease (truncated): the next driver takes it over as an
expired lease, and the job's status can still be read.

At the end every committed Parquet output is read with pyarrow.dataset and checked by
row id against the sequences: no duplicate, no loss, no altered row; nothing but
committed files is left in an output (no staged or temporary file), no unanswered
request, and every job's result store says FINISHED.

A second test runs one (smaller) seeded plan with the jobs' checkpoint directory and
outputs on an S3 server (moto's, tests/s3_server.py): plain ``s3://`` URIs and the
environment's ``storage_options``, the same faults, kills and checks, and no multipart
upload left pending (tests/spark/chaos_storage.py reads either storage from outside).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest
from chaos_faults import DRIVER_KILLS, EPOCH_DRIVER_KILLS, FUNCTION_FAULTS, WRITER_FAULTS, Fault
from chaos_storage import ChaosStorage
from s3_server import S3Server
from test_chaos import SEED_VARIABLE, Check, chaos_seed

from flintlock.core.checkpoint.fences import PAUSE_AT, PAUSE_MARKER
from flintlock.core.errors import FlintlockError
from flintlock.core.job.client import JobClient
from flintlock.core.job.lease import read_holder
from flintlock.plugin_api import StorageOptions

SCRIPT = Path(__file__).with_name("chaos_unbounded_driver.py")
CHAINS = 2
"""Driver processes running side by side: Spark's start and an epoch's waits leave the
second core idle."""
TASK_FAULTS_PER_JOB = 3
"""At most this many failures in one job's tasks: ``local[2,4]`` allows 3 per task."""
COMMIT_FAULTS_PER_JOB = 1
"""Each fails one ``execute()``; the driver allows a job 6 in one process."""
KILLS_PER_JOB = 3
"""Driver kills (planned faults and the test's) in one job: each costs a Spark start."""
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""For the drivers' JVMs: short lives, so no JIT compiler threads (halves Spark's start)."""
MAX_DRIVER_RUNS = 16
DRIVER_TIMEOUT = 240.0
NEW_PROCESS_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
)
RESUME_TIMEOUT = 120.0
"""Seconds to wait for a paused driver's lease to expire, and for it to stop once resumed."""
DAMAGE_LOCK = threading.Lock()
DAMAGED_PLANS: set[Path] = set()
"""Plans (their base folders) whose one lease damage was done (chains share it)."""
REQUEST_TIMEOUT = 120.0
"""Seconds a stop or savepoint request waits for its answer (through driver restarts)."""
REFUSED_WITHIN = 5.0
"""A request that fails this fast was refused (the job was not running): sent again."""
EPOCH_SECONDS = 0.6
"""An epoch's duration before the first one is measured, for timing kills."""


@dataclass(frozen=True)
class Sizes:
    """How large a seed's plan is: its jobs and their epochs, and the faults on top of one
    of each kind (each driver kill costs a Spark start, each epoch its checkpoint)."""

    jobs_per_chain: int
    rows: range
    """A job's rows, drawn from."""
    per_epoch: tuple[int, ...]
    twin_rows: int
    twin_per_epoch: tuple[int, ...]
    extra_faults: int
    """Task and commit faults drawn at random on top of one of each kind."""
    random_kills: int
    """Drivers the test kills at a random moment of a random epoch."""


ON_DISK = Sizes(2, range(2500, 3300, 100), (200, 250), 1500, (200, 250, 300), 4, 2)
ON_S3 = Sizes(2, range(2000, 2300, 100), (200,), 600, (200, 300), 2, 1)
"""Every epoch's checkpoint and commit are requests to the S3 server: fewer epochs (10
to 11 a job, the fewest that leave room for a request, a second one and the kills after
it), one random kill and two extra faults (>= 20 faults still)."""

REQUEST_KILLS = ("kill_in_savepoint_commit", "kill_mid_savepoint_commit", "kill_while_requested")
"""Driver kills tied to a stop or savepoint request: in its savepoint's commit (a fault
of the sink, before any file or after the first), or by the test while it is pending."""
REQUIRED = [
    ("files", "kill_in_savepoint_commit"),
    ("files", "kill_mid_savepoint_commit"),
    ("request", "kill_while_requested"),
    ("files", "kill_in_commit"),
    ("files", "kill_mid_commit"),
    ("files", "kill_in_post_commit"),
    ("driver", "kill_between_epochs"),
    ("driver", "kill_after_execute"),
    ("process", "raise"),
    ("process", "worker_kill"),
    ("map", "raise"),
    ("map", "worker_kill"),
    ("files", "write"),
    ("files", "finish"),
    ("files", "pre_commit"),
    ("files", "mid_commit"),
    ("files", "commit"),
]
"""One of each fault kind at each place it can happen, the most constrained first, so
that every seed finds a job for each."""
RANDOM_KINDS = [
    ("map", "raise"),
    ("process", "raise"),
    ("files", "write"),
    ("files", "pre_commit"),
    ("files", "commit"),
]
TASK_KINDS = {*FUNCTION_FAULTS, *WRITER_FAULTS}
"""Faults that fail a Spark task (the others happen on the driver)."""
KILL_KINDS = {*DRIVER_KILLS, *EPOCH_DRIVER_KILLS, *REQUEST_KILLS}
COMMIT_KINDS = ("commit", "mid_commit")
"""A commit on the driver raises, before any file or after the first of several."""
MID_COMMIT_KINDS = ("kill_mid_commit", "kill_mid_savepoint_commit", "mid_commit")
"""Faults after the first file of a commit, while more follow: a sink subtask writes one
file per epoch (a sequence's epoch reaches it as one batch), so these need parallelism 2."""


def category(kind: str) -> str:
    """The summary's name for a fault."""
    if kind in KILL_KINDS:
        return "driver kills"
    if kind == "worker_kill":
        return "worker kills"
    if kind in COMMIT_KINDS:
        return "commit failures"
    if kind == "raise":
        return "task failures"
    return "sink writer failures"


@dataclass
class Plan:
    """What one seed runs: the twin job, the jobs (as the driver reads them), the kills."""

    seed: int
    base: Path
    """Local: the markers, the drivers' plans, logs and outcomes."""
    storage: ChaosStorage
    """The jobs' checkpoint directory (``chk``) and outputs (``out/<job>``)."""
    twin: dict[str, Any]
    jobs: list[dict[str, Any]]
    random_kills: list[tuple[str, int, float]]
    """(job, checkpoint id from which it is due, fraction of an epoch after that epoch)."""
    pause: tuple[str, int] | None = None
    """(job, checkpoint): a driver pauses before it publishes that checkpoint or a later one."""

    def chain(self, number: int) -> list[dict[str, Any]]:
        """The jobs one chain's driver runs, in order: the twin job first."""
        return [self.twin, *self.jobs[number::CHAINS]]

    def faults(self) -> list[Fault]:
        """Every planned fault that a marker records."""
        return [Fault.from_json(f) for job in self.jobs for f in job["faults"]]

    def requests(self) -> list[dict[str, Any]]:
        return [request for job in self.jobs for request in job["requests"]]

    def planned_kills(self) -> int:
        """Driver kills of the plan: kill faults, kills while a request is pending, random."""
        return sum(kills_in(job) for job in self.jobs)


def epochs_of(job: dict[str, Any]) -> int:
    """How many epochs (checkpoint ids) the job's sequence takes."""
    return math.ceil(job["rows"] / job["per_epoch"])


def kills_in(job: dict[str, Any]) -> int:
    """Driver kills planned in ``job``: kill faults, kills while a request is pending, random."""
    faults = sum(f["kind"] in KILL_KINDS for f in job["faults"])
    pending = sum(r["kill"] == "kill_while_requested" for r in job["requests"])
    return faults + pending + job["random_kills"]


def fits(job: dict[str, Any], where: str, kind: str) -> bool:
    """Whether a ``kind`` fault at ``where`` can happen in ``job`` within its budgets."""
    kinds = [f["kind"] for f in job["faults"]]
    if kind in TASK_KINDS and sum(k in TASK_KINDS for k in kinds) >= TASK_FAULTS_PER_JOB:
        return False
    if kind in COMMIT_KINDS and sum(k in COMMIT_KINDS for k in kinds) >= COMMIT_FAULTS_PER_JOB:
        return False
    if kind in KILL_KINDS and kills_in(job) >= KILLS_PER_JOB:
        return False
    if kind in MID_COMMIT_KINDS and job["parallelism"] < 2:
        return False  # a file per sink subtask and epoch: a commit of two needs two
    if kind in REQUEST_KILLS:  # one request with a kill per job: its first
        return not any(r["kill"] for r in job["requests"])
    if kind == "kill_after_execute":
        return kind not in kinds
    if where == "process":
        return job["keyed"]
    return True


def chain_kills(jobs: list[dict[str, Any]], job: dict[str, Any]) -> int:
    """Driver kills planned so far in ``job``'s chain (kills are spread over chains)."""
    return sum(kills_in(other) for other in jobs[jobs.index(job) % CHAINS :: CHAINS])


def make_plan(
    seed: int, base: Path, storage: ChaosStorage | None = None, sizes: Sizes = ON_DISK
) -> Plan:
    """Jobs of random shape, one fault of each kind plus random extras, requests and kills;
    their checkpoints and outputs in ``storage`` (default: ``base`` on disk)."""
    storage = storage or ChaosStorage(str(base))
    rng = random.Random(seed)
    count = CHAINS * sizes.jobs_per_chain
    keyed = [True, True] + [rng.random() < 0.5 for _ in range(count - 2)]
    parallelism = [2, 2] + [rng.choice([1, 2]) for _ in range(count - 2)]
    rng.shuffle(keyed)
    rng.shuffle(parallelism)
    jobs = []
    for index in range(count):
        name = f"chaos-u{index:02d}"
        jobs.append(
            {
                "name": name,
                "first_id": (index + 1) * 1_000_000,
                "rows": rng.randrange(sizes.rows.start, sizes.rows.stop, sizes.rows.step),
                "per_epoch": rng.choice(sizes.per_epoch),
                "parallelism": parallelism[index],
                "keyed": keyed[index],
                "checkpoint_dir": storage.uri("chk"),
                "output": storage.uri(f"out/{name}"),
                "faults": [],
                "requests": [],
                "random_kills": 0,
            }
        )
    twin = {
        "name": "chaos-twin",
        "twin": True,
        "first_id": 0,
        "rows": sizes.twin_rows,
        "per_epoch": rng.choice(sizes.twin_per_epoch),
        "parallelism": 2,
        "keyed": True,
        "checkpoint_dir": storage.uri("chk"),
        "output": storage.uri("out/chaos-twin"),
        "faults": [],
        "requests": [],
        "random_kills": 0,
    }
    actions = [*rng.sample(["stop", "savepoint"], 2), rng.choice(["stop", "savepoint"])]
    for number, (where, kind) in enumerate(REQUIRED):
        fault_id = f"f{number:02d}-{where}-{kind}"
        if kind in REQUEST_KILLS:
            place_request_kill(rng, jobs, fault_id, kind, actions[REQUEST_KILLS.index(kind)])
        else:
            place_fault(rng, jobs, Fault(fault_id, where, kind))
    for number in range(len(REQUIRED), len(REQUIRED) + sizes.extra_faults):
        where, kind = rng.choice([k for k in RANDOM_KINDS if any(fits(j, *k) for j in jobs)])
        place_fault(rng, jobs, Fault(f"f{number:02d}-{where}-{kind}", where, kind))
    for job in jobs:
        plan_requests(rng, job)
    kills = []
    for _ in range(sizes.random_kills):
        job = pick(rng, jobs, [job for job in jobs if kills_in(job) < KILLS_PER_JOB])
        job["random_kills"] += 1
        kills.append((job["name"], rng.randint(1, epochs_of(job) - 3), rng.uniform(0.0, 1.5)))
    paused = rng.choice(jobs)
    pause = (paused["name"], rng.randint(2, epochs_of(paused) - 3))
    return Plan(seed, base, storage, twin, jobs, sorted(kills), pause)


def pick(rng: random.Random, jobs: list[dict[str, Any]], fitting: list[dict[str, Any]]) -> Any:
    """A random job of ``fitting`` whose chain has the fewest driver kills so far."""
    fewest = min(chain_kills(jobs, job) for job in fitting)
    return rng.choice([job for job in fitting if chain_kills(jobs, job) == fewest])


def place_fault(rng: random.Random, jobs: list[dict[str, Any]], fault: Fault) -> None:
    """Put ``fault`` in a random job where it fits, due from a random epoch on."""
    fitting = [job for job in jobs if fits(job, fault.where, fault.kind)]
    job = pick(rng, jobs, fitting) if fault.kind in KILL_KINDS else rng.choice(fitting)
    epoch = rng.randint(1, epochs_of(job) - 2)  # a full epoch: every subtask has rows
    at = 1
    if fault.where in ("map", "process"):  # some subtask always reaches that record
        at = rng.randint(1, job["per_epoch"] // (4 * job["parallelism"]))
    if fault.kind in ("finish", "kill_after_execute"):
        epoch = 0  # the final epoch, or after it
    job["faults"].append(Fault(fault.id, fault.where, fault.kind, at, epoch).to_json())


def place_request_kill(
    rng: random.Random, jobs: list[dict[str, Any]], fault_id: str, kind: str, action: str
) -> None:
    """A job's first request, a ``action``, with a driver kill while it is carried out."""
    job = pick(rng, jobs, [job for job in jobs if fits(job, "request", kind)])
    after = 2 if kind == "kill_while_requested" else rng.randint(2, 3)  # a second follows
    request = new_request(rng, job, action, after)
    request["kill"] = kind
    if kind == "kill_while_requested":
        request["kill_after"] = round(rng.uniform(0.0, 0.5), 3)
    else:  # the sink kills the driver in the commit of this request's savepoint
        fault = Fault(fault_id, "files", kind, 1, request["after"])
        job["faults"].append(fault.to_json())
    job["requests"].append(request)


def new_request(rng: random.Random, job: dict[str, Any], action: str, after: int) -> dict:
    """A request sent once the job committed checkpoint ``after``."""
    return {
        "id": f"{job['name']}-r{len(job['requests'])}",
        "job": job["name"],
        "action": action,
        "via": rng.choice(["cli", "client"]),
        "after": after,
        "kill": None,
        "kill_after": None,
    }


def plan_requests(rng: random.Random, job: dict[str, Any]) -> None:
    """Every job gets a request, some a second one later (sent once the first is answered),
    each well before the job's last epochs (a request must find the job running). A
    request the test kills the driver during always has a second: if the first was
    answered before the kill was due, the kill comes during the second."""
    if not job["requests"]:
        request = new_request(rng, job, rng.choice(["stop", "savepoint"]), rng.randint(2, 3))
        job["requests"].append(request)
    after = job["requests"][-1]["after"] + 3
    second = job["requests"][0]["kill"] == "kill_while_requested" or rng.random() < 0.5
    if after <= epochs_of(job) - 5 and second:
        request = new_request(rng, job, rng.choice(["stop", "savepoint"]), after)
        job["requests"].append(request)


@dataclass
class Request:
    """One planned request as the test sends it, and how it went."""

    plan: dict[str, Any]
    state: str = "planned"
    """planned, sent (waiting for its answer), answered, failed."""
    answer: str = ""
    tries: list[str] = field(default_factory=list)
    """Earlier tries that were refused (the job was not running) or failed by an injected
    fault (a commit failure in the savepoint's commit): the request was sent again."""
    kill_after: float | None = None
    """Kill the driver this part of an epoch after the request is written, if still
    unanswered (``kill_while_requested``; a missed kill passes to the job's next request,
    where it comes as soon as that request waits)."""
    killed: bool = False
    kill_armed: bool = False
    thread: threading.Thread | None = None


@dataclass
class DriverRun:
    """One driver process: how it ended and what it printed."""

    label: str
    process: subprocess.Popen[str]
    stderr_path: Path
    stdout: list[tuple[float, str]] = field(default_factory=list)
    """Each line with the seconds since the process started."""
    killed_by_test: list[str] = field(default_factory=list)
    jobs: set[str] = field(default_factory=set)
    """The jobs it started (``START <job>``)."""
    result: dict[str, Any] | None = None
    started: float = field(default_factory=time.perf_counter)
    current_job: str | None = None
    """The job of its last ``START`` line."""
    pause_marker: Path | None = None
    """The file the driver creates when it pauses itself (``FLINTLOCK_PAUSE_MARKER``)."""
    paused: bool = False
    paused_result: dict[str, Any] | None = None
    """What the paused driver printed once resumed (its outcome under ``paused``)."""
    reader: threading.Thread | None = None

    def tail(self) -> str:
        stdout = "\n".join(f"+{at:.1f}s {text}" for at, text in self.stdout[-30:])
        return f"{stdout}\n--- stderr ---\n{self.stderr_path.read_text()[-4000:]}"


class Chain:
    """One chain of jobs: its driver runs, the test's kills and requests, across restarts."""

    def __init__(self, plan: Plan, number: int) -> None:
        self.plan = plan
        self.number = number
        self.jobs = plan.chain(number)
        names = {job["name"] for job in self.jobs}
        self.kills = [kill for kill in plan.random_kills if kill[0] in names]
        self.armed: set[int] = set()
        """The random kills armed (``self.kills`` indexes): once, even if the driver dies
        before one comes due."""
        self.requests = {
            job["name"]: [Request(r, kill_after=r["kill_after"]) for r in job["requests"]]
            for job in self.jobs
        }
        self.epochs_of = {job["name"]: epochs_of(job) for job in self.jobs}
        self.epoch_seconds: list[float] = []
        self.runs: list[DriverRun] = []
        self.lock = threading.Lock()
        self.timers: list[threading.Timer] = []
        self.pause = plan.pause if plan.pause and plan.pause[0] in names else None
        self.paused_runs: list[DriverRun] = []
        self.resumers: list[threading.Thread] = []
        self.damaged: list[str] = []
        """Lease files the test damaged after a kill, and what status said of the job."""
        self.problems: list[str] = []

    # ---- the driver runs ----

    def run(self) -> list[DriverRun]:
        """Start the driver again after every kill until it returns its RESULT."""
        for attempt in range(MAX_DRIVER_RUNS):
            run = self.run_driver(f"{self.number}.{attempt}")
            if run.paused:
                self.take_over_from(run)
                continue
            if run.result is not None:
                self.finish_requests()  # their last notes go into the timeline too
                for resumer in self.resumers:
                    resumer.join(RESUME_TIMEOUT + DRIVER_TIMEOUT)
            with (self.plan.base / f"timeline-{self.number}.txt").open("a") as timeline:
                for done in [*self.paused_runs, run] if run.result is not None else [run]:
                    timeline.writelines(
                        f"{done.label} +{at:.1f}s {text}\n" for at, text in done.stdout
                    )
            if run.result is not None:
                return self.runs
            assert run.process.returncode == -signal.SIGKILL, (
                f"chaos seed={self.plan.seed}: driver {run.label} ended with "
                f"{run.process.returncode}, not by a kill\n{run.tail()}"
            )
            self.damage_lease_after_kill(run)
        pytest.fail(
            f"chaos seed={self.plan.seed}: chain {self.number} did not return in "
            f"{MAX_DRIVER_RUNS} runs"
        )

    def run_driver(self, label: str) -> DriverRun:
        """Start the driver in a session of its own and follow its lines until it ends."""
        base = self.plan.base
        plan_path = base / f"plan-{label}.json"
        document = {
            "base": str(base),
            "chain": self.number,
            "chains": CHAINS,
            "jobs": self.jobs,
            "storage_options": self.plan.storage.options,
        }
        plan_path.write_text(json.dumps(document, indent=1))
        stderr_path = base / f"driver-{label}.stderr"
        environment = {**os.environ, "JDK_JAVA_OPTIONS": JAVA_OPTIONS}
        marker = None
        if self.pause is not None and not self.paused_runs:  # until one driver paused
            marker = base / f"paused-{label}"
            environment[PAUSE_AT] = f"publish-checkpoint:{self.pause[0]}:{self.pause[1]}"
            environment[PAUSE_MARKER] = str(marker)
        with stderr_path.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, str(SCRIPT), str(plan_path)],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=SCRIPT.parent,
                env=environment,
                # a process group of its own in the test's session: a group that is orphaned
                # (its own session) gets SIGHUP and SIGCONT from the kernel whenever a
                # member exits while one is stopped, which would end a driver's pause
                **NEW_PROCESS_GROUP,
            )
        run = DriverRun(label, process, stderr_path, pause_marker=marker)
        with self.lock:
            self.runs.append(run)
        watchdog = threading.Timer(DRIVER_TIMEOUT, self.kill, (run, "hung"))
        watchdog.start()
        run.reader = threading.Thread(target=self.read_lines, args=(run,), daemon=True)
        run.reader.start()
        while run.reader.is_alive():
            run.reader.join(0.05)
            if marker is not None and marker.exists():  # it stopped itself: a stale driver
                with self.lock:  # unless a kill came first: the job's next run pauses
                    run.paused = not run.killed_by_test
                if not run.paused:
                    marker = None
                    continue
                watchdog.cancel()
                run.stdout.append((time.perf_counter() - run.started, "PAUSED (SIGSTOP)"))
                return run
        process.wait()
        run.stdout.append((time.perf_counter() - run.started, f"exit {process.returncode}"))
        watchdog.cancel()
        with self.lock:
            for timer in self.timers:
                timer.cancel()
            self.timers.clear()
        with contextlib.suppress(ProcessLookupError):  # nothing of the group stays behind
            os.killpg(process.pid, signal.SIGKILL)
        assert "hung" not in run.killed_by_test, (
            f"chaos seed={self.plan.seed}: driver {label} hung for {DRIVER_TIMEOUT:.0f} s\n"
            f"{run.tail()}"
        )
        results = [text for _, text in run.stdout if text.startswith("RESULT ")]
        if process.returncode == 0 and results:
            run.result = json.loads(results[-1].removeprefix("RESULT "))
        return run

    def read_lines(self, run: DriverRun) -> None:
        """Follow the driver's lines until it ends (a paused driver's too, once resumed)."""
        assert run.process.stdout is not None
        for line in run.process.stdout:
            run.stdout.append((time.perf_counter() - run.started, line.rstrip("\n")))
            if not run.paused:
                self.on_line(run, line.split())

    # ---- paused drivers and damaged leases ----

    def take_over_from(self, run: DriverRun) -> None:
        """A driver paused itself before a publish: once its lease expired, the chain's
        next driver takes the job over; the paused one is resumed after that driver
        committed an epoch of the job (``resume_when_taken_over``)."""
        self.paused_runs.append(run)
        job = run.current_job
        assert job is not None, run.tail()
        storage = self.plan.storage.job_storage(job)
        deadline = time.monotonic() + RESUME_TIMEOUT
        while time.monotonic() < deadline:  # the takeover's condition: not a publish's
            holder = read_holder(storage, storage.base_path)
            if holder is None or not holder.holds():
                break
            time.sleep(0.1)
        self.note(f"PAUSED driver {run.label} lost its lease on {job}: a successor starts")
        resumer = threading.Thread(target=self.resume_when_taken_over, args=(run, job))
        resumer.start()
        self.resumers.append(resumer)

    def resume_when_taken_over(self, run: DriverRun, job: str) -> None:
        """SIGCONT the paused driver once a later driver committed an epoch of ``job`` (or
        ended); then collect what it printed: it must stop on a lease error."""
        deadline = time.monotonic() + RESUME_TIMEOUT + DRIVER_TIMEOUT
        while time.monotonic() < deadline:
            later = self.runs[self.runs.index(run) + 1 :]
            if any(
                text.startswith((f"EPOCH {job} ", f"DONE {job} "))
                for other in later
                for _, text in list(other.stdout)
            ) or any(other.process.poll() is not None for other in later):
                break
            time.sleep(0.1)
        run.stdout.append((time.perf_counter() - run.started, "RESUMED (SIGCONT)"))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.process.pid, signal.SIGCONT)
        try:
            run.process.wait(RESUME_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.problems.append(f"paused driver {run.label} did not stop once resumed")
        if run.reader is not None:
            run.reader.join(10.0)
        with contextlib.suppress(ProcessLookupError):  # its JVM and workers
            os.killpg(run.process.pid, signal.SIGKILL)
        results = [text for _, text in run.stdout if text.startswith("RESULT ")]
        if results:
            run.paused_result = json.loads(results[-1].removeprefix("RESULT ")).get("paused")

    def damage_lease_after_kill(self, run: DriverRun) -> None:
        """After the plan's first kill: truncate the newest generation of the killed job's
        lease; its status must still be read, and the next driver takes it over.

        On S3 no crash leaves a torn object (a PUT is whole or absent): there the damage is
        the same truncated bytes written over the generation's object, as a buggy or
        foreign writer would leave it."""
        with DAMAGE_LOCK:
            if self.plan.base in DAMAGED_PLANS or run.current_job is None:
                return
            DAMAGED_PLANS.add(self.plan.base)
        storage = self.plan.storage
        lease = f"chk/{run.current_job}/_lease"
        newest = storage.files(lease, f"{lease}/[0-9]*[0-9].json")
        if not newest:
            return
        data = storage.read(newest[-1])
        storage.write(newest[-1], data[: max(1, len(data) // 2)])
        try:
            said = JobClient(storage.checkpoints(), run.current_job).status()["status"]
        except FlintlockError as error:
            said = f"status failed: {error}"
            self.problems.append(f"{newest[-1]} damaged: {said}")
        self.damaged.append(f"{newest[-1]} ({said})")
        self.note(f"DAMAGED {newest[-1].rsplit('/', 1)[-1]} of {run.current_job}: status {said}")

    def kill(self, run: DriverRun, reason: str) -> bool:
        """SIGKILL the driver's process group if it still runs; whether it did."""
        with self.lock:
            if run.process.poll() is not None or run.result is not None or run.paused:
                return False
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, signal.SIGKILL)
                run.killed_by_test.append(reason)
                run.stdout.append((time.perf_counter() - run.started, f"KILLED {reason}"))
                return True
        return False

    def on_line(self, run: DriverRun, word: list[str]) -> None:
        """After each committed epoch: arm the random kills and send the requests due."""
        if word[:1] == ["START"]:
            run.jobs.add(word[1])
            run.current_job = word[1]
        if word[:1] != ["EPOCH"]:
            return
        job, checkpoint = word[1], int(word[2])
        if word[5] != "1":  # a run's first epoch starts Python workers: not typical
            self.epoch_seconds.append(float(word[4]))
        for number, (name, due, fraction) in enumerate(self.kills):
            if name == job and checkpoint >= due and number not in self.armed:
                self.armed.add(number)
                delay = fraction * self.typical_epoch()
                self.start_timer(delay, lambda run=run: self.kill(run, "random"))
        for request in self.requests.get(job, []):
            if request.state in ("sent", "failed"):
                break  # one at a time, in order
            if request.state == "planned":
                if request.plan["after"] <= checkpoint <= self.epochs_of[job] - 1:
                    self.send(request)
                break

    def start_timer(self, delay: float, action: Any) -> None:
        timer = threading.Timer(delay, action)
        with self.lock:
            self.timers.append(timer)
        timer.start()

    def typical_epoch(self) -> float:
        """The median duration of the last epochs (seconds), for timing kills."""
        return statistics.median(self.epoch_seconds[-10:] or [EPOCH_SECONDS])

    def current_run(self) -> DriverRun:
        with self.lock:
            return self.runs[-1]

    def note(self, text: str) -> None:
        """A line of the test's own in the current driver run's timeline."""
        run = self.current_run()
        run.stdout.append((time.perf_counter() - run.started, text))

    # ---- requests ----

    def send(self, request: Request) -> None:
        """Send ``request`` in a thread of its own (its answer may take driver restarts)."""
        request.state = "sent"
        self.note(
            f"REQUEST {request.plan['id']} {request.plan['action']} via {request.plan['via']}"
        )
        request.thread = threading.Thread(target=self.carry_out, args=(request,), daemon=True)
        request.thread.start()
        if request.kill_after is not None and not request.kill_armed:
            request.kill_armed = True
            threading.Thread(target=self.kill_while_pending, args=(request,), daemon=True).start()

    def carry_out(self, request: Request) -> None:
        """Ask for the savepoint or stop and wait for its answer; a quick refusal (the job
        was not running at that moment) is sent again after the next epoch."""
        plan, started = request.plan, time.monotonic()
        try:
            if plan["via"] == "cli":
                request.answer = cli_request(plan["action"], self.plan.storage, plan["job"])
            else:
                client = JobClient(self.plan.storage.checkpoints(), plan["job"])
                action = client.stop if plan["action"] == "stop" else client.savepoint
                request.answer = action(timeout=REQUEST_TIMEOUT)
            request.state = "answered"
            self.note(f"ANSWERED {request.plan['id']} {request.answer}")
        except (FlintlockError, RequestFailed) as error:
            text = f"{type(error).__name__}: {error}"
            self.note(f"REFUSED {request.plan['id']} {text}")
            # refused as sent (no driver held the job): said so, or quick; the CLI's
            # own start may take longer than REFUSED_WITHIN on a busy machine
            refused = "request is refused" in text or time.monotonic() - started < REFUSED_WITHIN
            # the run it was sent to was killed, before or after the request reached it
            expired = "its driver is gone" in text or "its last driver," in text
            ended_first = "(recorded FINISHED" in text or (
                # sent again after a kill, it reached the job's last epoch: the run ended
                # without taking it, as Flink fails a savepoint of a job that finishes
                request.tries and "the job ended before it took the savepoint" in text
            )
            if ended_first:
                request.tries.append(text)
                request.state = "planned"
            elif expired or ((refused or "InjectedFault" in text) and refusals(request) < 5):
                # a run the plan killed is no failure of the request, however often it
                # happens (the plan's driver runs are finite); other refusals: 5 tries
                request.tries.append(text)
                request.state = "planned"  # sent again after the next epoch
            else:
                request.answer, request.state = text, "failed"

    def kill_while_pending(self, request: Request) -> None:
        """Kill the driver a random part of an epoch after the request is written and a
        driver runs the job, if the request is still unanswered by then. A driver that
        ended first (another fault killed it) leaves the request to the job's next run,
        which is sent it again: the kill waits for that one. A request answered first
        moves the kill to the job's next request."""
        job = request.plan["job"]
        storage = self.plan.storage
        deadline = time.monotonic() + REQUEST_TIMEOUT
        tried: list[DriverRun] = []
        while time.monotonic() < deadline and request.state != "answered":
            current = self.current_run()  # after a restart: once the new driver has the job
            carried_out = request.state == "sent" and pending_requests(storage, job)
            if not carried_out or job not in current.jobs or current.result is not None:
                time.sleep(0.02)
                continue
            if any(run is current for run in tried):
                time.sleep(0.02)
                continue
            tried.append(current)
            assert request.kill_after is not None
            time.sleep(request.kill_after * self.typical_epoch())
            if pending_requests(storage, job) and self.kill(current, "while requested"):
                request.killed = True
                return
            if current.process.poll() is None and current.result is None and not current.paused:
                break  # the driver runs on: it answered before the kill was due
        later = self.requests[request.plan["job"]]
        index = later.index(request)
        if index + 1 < len(later):  # at once there: a quick answer must not miss it twice
            later[index + 1].kill_after = 0.0
            self.note(f"MISSED the kill during {request.plan['id']}: at the next request")

    def finish_requests(self) -> None:
        """Give requests still waiting a moment to see their answers."""
        for requests in self.requests.values():
            for request in requests:
                if request.thread is not None:
                    request.thread.join(10.0)


class RequestFailed(Exception):
    """``flintlock stop|savepoint`` exited with an error."""


def cli_request(action: str, storage: ChaosStorage, job: str) -> str:
    """``flintlock stop|savepoint <job folder>``: the savepoint's path it prints. On S3
    the folder is a plain URI and the store's settings are in the CLI's environment."""
    command = [sys.executable, "-m", "flintlock.cli", action, storage.uri(f"chk/{job}")]
    command += ["--timeout", str(REQUEST_TIMEOUT)]
    environment = {**os.environ, **storage.environment()}
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=REQUEST_TIMEOUT + 30,
            env=environment,
        )
    except subprocess.TimeoutExpired as error:
        raise RequestFailed(f"flintlock {action} hung") from error
    if done.returncode != 0:
        raise RequestFailed(done.stderr.strip()[-500:])
    return done.stdout.strip()


def pending_requests(storage: ChaosStorage, job: str) -> list[str]:
    """Request files in a job's ``_control`` folder without an answer beside them."""
    control = f"chk/{job}/_control"
    names = {path.rsplit("/", 1)[-1] for path in storage.files(control, f"{control}/*.json")}
    return sorted(
        name
        for name in names
        if not name.endswith(".answer.json") and f"{name[:-5]}.answer.json" not in names
    )


# ---- the end: what the outputs and folders say ----


def check_outputs(plan: Plan) -> Check:
    """Read every job's committed Parquet; count by row id against its sequence."""
    check = Check()
    for job in [plan.twin, *plan.jobs]:
        faults = ", ".join(f"{f['kind']}@{f['where']}" for f in job["faults"]) or "no faults"
        requests = ", ".join(r["action"] for r in job["requests"]) or "no requests"
        label = f"{job['name']} (p={job['parallelism']}, {faults}; {requests})"
        table = pa.table({})
        filesystem, output = StorageOptions(plan.storage.options).filesystem(job["output"])
        if filesystem.get_file_info(output).type == pafs.FileType.Directory:
            table = ds.dataset(output, filesystem=filesystem, format="parquet").to_table()
        check.table(label, table, job["first_id"], job["rows"])
        if "event_time" in table.column_names:
            ids, times = table.column("id").to_pylist(), table.column("event_time").to_pylist()
            moved = sum(1 for i, t in zip(ids, times, strict=True) if i != t)
            check.altered += moved
            if moved:
                check.problems.append(f"{label}: {moved} rows with another event time")
    return check


COMMITTED = re.compile(r"out/[^/]+/(part-[^/]+\.parquet|_flintlock/[^/]+\.json)")
"""What an output holds once every job finished: committed Parquet files (read above)
and the FileSink's registry of the jobs that write there."""


def left_behind(plan: Plan) -> list[str]:
    """Anything in an output but committed files and the registry (staged files in
    ``_staging-*`` folders, temporary files), snapshot files no kept checkpoint refers to,
    unanswered control requests, and multipart uploads under the plan's prefix never
    completed nor aborted (S3)."""
    storage = plan.storage
    stray = [path for path in storage.files("out") if not COMMITTED.fullmatch(path)]
    names = [job["name"] for job in [plan.twin, *plan.jobs]]
    snapshots = [path for name in names for path in unreferenced_snapshots(storage, name)]
    requests = [
        f"chk/{name}/_control/{request}"
        for name in names
        for request in pending_requests(storage, name)
    ]
    uploads = [f"multipart upload of {key}" for key in storage.pending_uploads()]
    return stray + snapshots + requests + uploads


def unreferenced_snapshots(storage: ChaosStorage, job: str) -> list[str]:
    """Files in a run's checkpoint folders (``<run id>/chk-<N>/``) outside every snapshot
    folder that the acknowledgements of the job's kept checkpoints name: snapshots of
    checkpoints that never completed, or were replaced, and were not cleaned up."""
    folder = f"chk/{job}"
    referenced = set()
    for metadata in storage.files(f"{folder}/checkpoints", "*/_metadata.json"):
        for acknowledgement in json.loads(storage.read(metadata)).get("acknowledgements", []):
            manifest = acknowledgement["manifest_path"]
            referenced.add(manifest[manifest.index(f"/{folder}/") + 1 :].rsplit("/", 1)[0] + "/")
    snapshot = re.compile(rf"{re.escape(folder)}/[0-9a-f]{{12}}/chk-\d+/.*")
    return [
        path
        for path in storage.files(folder)
        if snapshot.fullmatch(path) and not path.startswith(tuple(referenced))
    ]


def job_statuses(plan: Plan) -> dict[str, str]:
    """Each job's status in its result store (``_result.json``)."""
    statuses = {}
    for job in [plan.twin, *plan.jobs]:
        path = f"chk/{job['name']}/_result.json"
        exists = plan.storage.exists(path)
        statuses[job["name"]] = json.loads(plan.storage.read(path))["status"] if exists else "-"
    return statuses


def outcomes(base: Path, job: dict[str, Any]) -> list[dict[str, Any]]:
    """What the drivers recorded for ``job`` (one per chain that ran it)."""
    return [
        json.loads(path.read_text()) for path in sorted(base.glob(f"done/*-{job['name']}.json"))
    ]


@pytest.mark.slow
def test_every_row_exactly_once_in_unbounded_jobs_under_random_faults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = chaos_seed()
    with capsys.disabled():
        print(f"\nchaos-unbounded seed={seed} (set {SEED_VARIABLE}={seed} to run this plan again)")
    run_plan(make_plan(seed, tmp_path), "chaos-unbounded", capsys)


@pytest.mark.slow
def test_every_row_exactly_once_in_unbounded_jobs_on_s3_under_random_faults(
    tmp_path: Path, s3: S3Server, s3_folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One seeded plan with every job's checkpoint directory and FileSink output on the S3
    server: plain ``s3://`` URIs, the store's settings as ``storage_options`` in the
    drivers' plan. Every fault kind of the disk suite applies (all kill processes or fail
    calls, none touches a local file by path); the lease damage writes the truncated
    bytes over the generation's object. Smaller: ``ON_S3``."""
    seed = chaos_seed()
    with capsys.disabled():
        print(
            f"\nchaos-unbounded-s3 seed={seed} (set {SEED_VARIABLE}={seed} to run this plan again)"
        )
    secret = f"secret-{uuid.uuid4().hex}"  # looked for in what the drivers print
    storage = ChaosStorage(s3.plain_uri(s3_folder), s3.storage_options(secret))
    run_plan(make_plan(seed, tmp_path, storage, ON_S3), "chaos-unbounded-s3", capsys)


def run_plan(plan: Plan, suite: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Run both chains of ``plan`` to the end, then judge the outputs, folders and faults."""
    seed, tmp_path = plan.seed, plan.base
    chains = [Chain(plan, number) for number in range(CHAINS)]
    started = time.perf_counter()

    with ThreadPoolExecutor(CHAINS) as pool:
        runs = [run for ran in pool.map(Chain.run, chains) for run in ran]

    seconds = time.perf_counter() - started
    problems = []
    fired = set(os.listdir(tmp_path / "markers"))
    requests = [r for chain in chains for rs in chain.requests.values() for r in rs]
    unsent = [r.plan["id"] for r in requests if r.state == "planned"]  # the job ended first
    # a savepoint-commit kill cannot fire if its job ended before its request was sent,
    # nor if a stop reached the job's final epoch: it is answered with the final
    # checkpoint, and no savepoint is committed
    excused = {r.plan["job"] for r in requests if r.state == "planned" and r.plan["kill"]}
    excused |= {
        r.plan["job"]
        for r in requests
        if r.state == "answered" and r.plan["kill"] and "/checkpoints/chk-" in str(r.answer)
    }
    job_of = {f["id"]: job["name"] for job in plan.jobs for f in job["faults"]}
    missing = [
        fault.id
        for fault in plan.faults()
        if fault.id not in fired
        and not (fault.kind in REQUEST_KILLS and job_of[fault.id] in excused)
    ]
    if missing:
        problems.append(f"planned faults that never fired: {missing}")
    for request in requests:
        if request.state not in ("answered", "planned"):
            sent = request.plan
            problems.append(
                f"request {sent['id']} ({sent['action']} via {sent['via']} after checkpoint "
                f"{sent['after']}) {request.state}: {request.answer} (earlier tries: "
                f"{request.tries})"
            )
    for chain in chains:
        for name, sent in chain.requests.items():
            planned = any(r.plan["kill"] == "kill_while_requested" for r in sent)
            # a quick answer moves the kill to the job's next request: when the job ended
            # before that one was sent, the kill had no request left to fire in
            left_unsent = any(r.state == "planned" for r in sent)
            if planned and not left_unsent and not any(r.killed for r in sent):
                problems.append(f"{name}: every request was answered before the test's kill")
    paused = [run for chain in chains for run in chain.paused_runs]
    damaged = [text for chain in chains for text in chain.damaged]
    problems += [problem for chain in chains for problem in chain.problems]
    if plan.pause is not None and not paused:
        problems.append(f"the planned pause {plan.pause} never came")
    for run in paused:
        outcome = run.paused_result or {}
        error = outcome.get("error", "")
        stopped = outcome.get("outcome") == "lease" and (
            "was already" in error or "lost its lease" in error
        )
        if not stopped:
            problems.append(f"paused driver {run.label} did not stop on a lease error: {outcome}")
    if not damaged:
        problems.append("no lease file was damaged (no driver kill?)")
    tally = Counter(category(fault.kind) for fault in plan.faults())
    tally["driver kills"] += sum(len(run.killed_by_test) for run in runs)
    tally["paused drivers"] += len(paused)
    tally["damaged leases"] += len(damaged)
    faults = sum(tally.values())
    for job in plan.jobs:
        ended = [o["outcome"] for o in outcomes(tmp_path, job)]
        if ended != ["finished"]:
            problems.append(f"{job['name']}: drivers ended it {ended} ({outcomes(tmp_path, job)})")
    twin = [
        f"{o['outcome']} after {o['executes']} execute() ({o.get('error', '')[:160]})"
        for o in outcomes(tmp_path, plan.twin)
    ]
    if sorted(o.split()[0] for o in twin) != ["finished", "lease"]:
        problems.append(
            f"{plan.twin['name']}: {CHAINS} drivers started together; expected one to run it "
            f"and one refused with a JobLeaseError, got: {'; '.join(twin)}"
        )
    statuses = job_statuses(plan)
    if set(statuses.values()) != {"FINISHED"}:
        problems.append(f"job result stores: {statuses}")
    check = check_outputs(plan)
    left = left_behind(plan)
    if left:
        problems.append(f"left behind after every job finished: {left}")
    secret = plan.storage.options.get("aws_secret_access_key")
    logs = [*tmp_path.glob("driver-*.stderr"), *tmp_path.glob("timeline-*.txt")]
    if secret and any(secret in log.read_text() for log in logs):
        problems.append("the storage options' secret is in what a driver printed")
    kinds = ", ".join(f"{n} {name}" for name, n in tally.most_common())
    actions = Counter(r.plan["action"] for r in requests if r.state == "answered")
    if not actions:  # kills of a seed may end every try of one kind: each seed asks both
        problems.append("no stop and no savepoint request was answered")
    summary = (
        f"{suite} seed={seed}: {len(runs)} driver runs, {faults} faults ({kinds}), "
        f"{actions['stop']} stops and {actions['savepoint']} savepoints answered "
        f"({len(unsent)} not sent: their job ended first; {len(excused)} of them carried a "
        f"kill that could not fire), "
        f"{len(paused)} driver paused past its lease "
        f"({[(r.paused_result or {}).get('error', '')[:90] for r in paused]}), "
        f"damaged leases: {damaged}, "
        f"{CHAINS} drivers on one job, {check.duplicates} duplicates, {check.losses} losses, "
        f"{check.rows_checked:,} rows checked in {seconds:.0f} s"
    )
    with capsys.disabled():
        print(summary)
    detail = "\n  ".join([summary, *check.problems, *problems])
    assert check.duplicates == 0 and check.losses == 0 and check.altered == 0, detail
    assert not problems, detail
    assert faults >= 20, detail


@pytest.mark.parametrize("sizes", [ON_DISK, ON_S3], ids=["disk", "s3"])
def test_every_seed_plans_each_unbounded_fault_within_the_retry_budgets(
    tmp_path: Path, sizes: Sizes
) -> None:
    for seed in range(300):
        plan = make_plan(seed, tmp_path, sizes=sizes)
        planned = Counter((f.where, f.kind) for f in plan.faults())
        pending = [r for r in plan.requests() if r["kill"] == "kill_while_requested"]
        planned[("request", "kill_while_requested")] = len(pending)
        for where, kind in REQUIRED:
            assert planned[(where, kind)] >= 1, (seed, kind)
        assert len(plan.faults()) + len(pending) + len(plan.random_kills) >= 20, seed
        actions = {r["action"] for r in plan.requests() if r["kill"] in REQUEST_KILLS}
        assert actions == {"stop", "savepoint"}, (seed, actions)
        for job in plan.jobs:
            kinds = [f["kind"] for f in job["faults"]]
            last = epochs_of(job)
            assert sum(k in TASK_KINDS for k in kinds) <= TASK_FAULTS_PER_JOB, (seed, job)
            assert sum(k in COMMIT_KINDS for k in kinds) <= COMMIT_FAULTS_PER_JOB, (seed, job)
            assert kills_in(job) <= KILLS_PER_JOB, (seed, job)
            assert all(f.get("epoch", 0) <= last - 2 for f in job["faults"]), (seed, job)
            assert job["requests"] and sum(bool(r["kill"]) for r in job["requests"]) <= 1
            assert not any(r["kill"] for r in job["requests"][1:]), (seed, job)
            if job["requests"][0]["kill"] == "kill_while_requested":
                assert len(job["requests"]) == 2, (seed, job)  # a missed kill passes on
            assert all(r["after"] <= last - 5 for r in job["requests"]), (seed, job)
            if "process" in {f["where"] for f in job["faults"]}:
                assert job["keyed"], (seed, job)
            if any(kind in MID_COMMIT_KINDS for kind in kinds):
                assert job["parallelism"] >= 2, (seed, job)
        per_chain = [sum(kills_in(job) for job in plan.jobs[n::CHAINS]) for n in range(CHAINS)]
        assert max(per_chain) - min(per_chain) <= 2, (seed, per_chain)
        epochs = {job["name"]: epochs_of(job) for job in plan.jobs}
        assert all(1 <= at <= epochs[name] - 3 for name, at, _ in plan.random_kills), seed
        assert plan.planned_kills() == len(plan.random_kills) + sum(
            f.kind in KILL_KINDS for f in plan.faults()
        ) + len(pending)


def test_what_is_left_behind_is_found_on_s3(tmp_path: Path, s3: S3Server, s3_folder: str) -> None:
    """The end's check of the S3 suite finds each kind of leftover through the plan's
    storage options: a staged file, a temporary file beside the registry, a snapshot no
    kept checkpoint names, a request without an answer and a multipart upload never
    completed; committed files, the registry, a kept checkpoint's snapshot and answered
    requests are not leftovers."""
    storage = ChaosStorage(s3.plain_uri(s3_folder), s3.storage_options())
    plan = make_plan(7, tmp_path, storage, ON_S3)
    for path in [
        "out/chaos-u00/part-r1-chk1-0-0.parquet",
        "out/chaos-u00/_flintlock/j1.json",
        "out/chaos-u00/_staging-j1/r1-chk3-0-7-0.parquet",
        "out/chaos-u01/_flintlock/j2.json.1a2b3c4d.inprogress",
        "chk/chaos-u02/_control/001-answered.json",
        "chk/chaos-u02/_control/001-answered.answer.json",
        "chk/chaos-u02/_control/002-waiting.json",
        "chk/chaos-u02/0123456789ab/chk-4/map/0-3/_task.json",
        "chk/chaos-u02/0123456789ab/chk-5/map/0-5/_task.json",
        "chk/chaos-u02/0123456789ab/chk-5/map/0-5/map/state.arrow",
    ]:
        storage.write(path, b"{}")
    manifest = storage.path("chk/chaos-u02/0123456789ab/chk-5/map/0-5/_task.json")
    metadata = {"kind": "checkpoint", "acknowledgements": [{"manifest_path": manifest}]}
    storage.write("chk/chaos-u02/checkpoints/chk-5/_metadata.json", json.dumps(metadata).encode())
    bucket, _, prefix = storage.filesystem()[1].partition("/")
    client = s3.client()
    client.create_multipart_upload(Bucket=bucket, Key=f"{prefix}/out/chaos-u03/_staging-j3/x")

    assert left_behind(plan) == [
        "out/chaos-u00/_staging-j1/r1-chk3-0-7-0.parquet",
        "out/chaos-u01/_flintlock/j2.json.1a2b3c4d.inprogress",
        "chk/chaos-u02/0123456789ab/chk-4/map/0-3/_task.json",
        "chk/chaos-u02/_control/002-waiting.json",
        f"multipart upload of {prefix}/out/chaos-u03/_staging-j3/x",
    ]
    assert job_statuses(plan)["chaos-u02"] == "-"


def refusals(request: Request) -> int:
    """The request's earlier tries that did not end because the plan killed their run."""
    return sum(
        1
        for text in request.tries
        if "its driver is gone" not in text and "its last driver," not in text
    )
