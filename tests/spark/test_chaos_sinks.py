"""Chaos suite per sink (issue 21): an unbounded job over many epochs (a sequence -> keyed
running sum -> the sink, ``unbounded_jobs``' job) under seeded random faults, and the
sink's output read back by the system's own reader holds every row exactly once, with
nothing left behind.

One plan per seed (``FLINTLOCK_CHAOS_SEED``, else random; printed with a replay hint):
the job's size, epoch size and parallelism, and faults at random epochs, each once (a
marker file, tests/spark/chaos_faults.py): task failures and a killed Python worker at a
random record of the keyed function; the sink (any sink, wrapped by
``chaos_faults.FaultySink``) failing in write, finish, pre_commit, in its commit before
or after the inner commit, and in post_commit; the driver SIGKILLed between checkpoint
completion and commit, after the commit before it is recorded, between epochs, and by
the test at a random moment. The driver
(tests/spark/sink_chaos_driver.py, ``local[2,4]`` so Spark retries tasks) starts a failed
``execute()`` again in-process; a killed driver is started again on the same job and
checkpoint directory until the job FINISHED. The same seed gives every sink the same plan.

Adding a sink: subclass ``ChaosTarget`` in tests/spark/sink_chaos_targets.py with
``@register``, a ``name``, ``make_sink()`` (the sink writing the job's rows k, id, total
into a place derived from ``self.base``, made again by each driver process),
``read_back()`` (every committed row as dicts, through the system's own reader),
``leftovers()`` (staged or unreferenced data files, prepared transactions: empty at the
end) and, if needed, ``setup()`` (``pytest.skip`` when the system is missing) and
``teardown()``. The suite picks it up as a new parameter; nothing here changes.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from chaos_faults import DelegatingSink, Fault, FaultySink
from sink_chaos_targets import TARGETS
from sink_scenarios import check_exactly_once
from test_chaos import SEED_VARIABLE, Plan, chaos_seed, run_chain

from flintlock.core.api.sink import TwoPhaseCommitSink

SCRIPT = Path(__file__).with_name("sink_chaos_driver.py")
JOB = "sink-chaos"
EPOCHS = (14, 18)
"""The job's epochs (checkpoint ids 1..N), drawn in this range."""
PER_EPOCH = (100, 150, 200)
PARALLELISM = (2, 2, 3)
REQUIRED = [
    ("sink", "finish"),
    ("process", "raise"),
    ("process", "worker_kill"),
    ("sink", "write"),
    ("sink", "pre_commit"),
    ("sink", "commit"),
    ("sink", "after_commit"),
    ("sink", "post_commit"),
    ("sink", "kill_in_commit"),
    ("sink", "kill_after_commit"),
    ("driver", "kill_between_epochs"),
]
"""One fault of each kind (finish first: it can only fire in the last epoch). Each
driver kill costs a Spark start, so there are four: three here and the test's random one
(a kill after post_commit, ``kill_in_post_commit``, adds little to the post_commit
failure, which also makes the next start commit and post-commit that checkpoint again)."""
EXTRA_KINDS = [
    ("process", "raise"),
    ("sink", "write"),
    ("sink", "pre_commit"),
    ("sink", "commit"),
    ("sink", "after_commit"),
    ("sink", "post_commit"),
]
"""Cheap faults drawn at random on top (no driver kill: each costs a Spark start)."""
EXTRA_FAULTS = 10
RANDOM_KILLS = 1
"""Driver kills by the test at a random moment: 0.3 to 3 times test_chaos.KILL_WINDOW
(4 s) after a driver starts the job (in its epochs' Spark jobs, commits or planning)."""
TASK_KINDS = {"raise", "worker_kill", "write", "finish", "pre_commit"}
TASK_FAULTS_PER_EPOCH = 2
"""Failed attempts of one epoch's tasks: ``local[2,4]`` allows a task 3."""
COMMIT_KINDS = {"commit", "after_commit", "post_commit"}
COMMIT_FAULTS = 5
"""Each fails one ``execute()``; the driver allows 6 in one process."""
UNREPORTED_KINDS = COMMIT_KINDS | {"kill_in_commit", "kill_after_commit"}
"""Faults that keep their epoch from being reported to ``progress`` (its commit is redone
when the job starts again), where a ``kill_between_epochs`` fault fires: never at its epoch."""
MIN_FAULTS = 20
COMMIT_SIDE = [f for f in REQUIRED if f[1] in UNREPORTED_KINDS | {"kill_between_epochs"}]
"""The faults around a commit (and the kill between epochs that a restart commits after)."""
LIGHT_TARGETS = {"postgres-subtask"}
"""Another mode of a sink that has a whole plan of its own ('postgres'): what differs is
its commit, so it gets the commit-side faults only, over fewer epochs (CI time)."""
LIGHT_EPOCHS = (7, 9)


def make_plan(seed: int, base: Path, target: str) -> Plan:
    """The job's shape and faults drawn from ``seed`` (the same for every full target)."""
    rng = random.Random(seed)
    light = target in LIGHT_TARGETS
    epochs = rng.randint(*(LIGHT_EPOCHS if light else EPOCHS))
    per_epoch = rng.choice(PER_EPOCH)
    job: dict[str, Any] = {
        "name": JOB,
        "target": target,
        "rows": epochs * per_epoch,
        "per_epoch": per_epoch,
        "parallelism": rng.choice(PARALLELISM),
        "epochs": epochs,
        "faults": [],
    }
    required = COMMIT_SIDE if light else REQUIRED
    for number, (where, kind) in enumerate(required):
        place_fault(rng, job, Fault(f"f{number:02d}-{where}-{kind}", where, kind))
    for number in range(len(required), len(required) + (0 if light else EXTRA_FAULTS)):
        where, kind = rng.choice([k for k in EXTRA_KINDS if fits(job, k[1])])
        place_fault(rng, job, Fault(f"f{number:02d}-{where}-{kind}", where, kind))
    kills = [(JOB, round(rng.uniform(0.3, 3.0), 3)) for _ in range(RANDOM_KILLS)]
    return Plan(seed, base, [job], kills, script=SCRIPT)


def fits(job: dict[str, Any], kind: str) -> bool:
    """Whether one more ``kind`` fault stays within the job's budgets."""
    kinds = [f["kind"] for f in job["faults"]]
    if kind in COMMIT_KINDS:
        return sum(k in COMMIT_KINDS for k in kinds) < COMMIT_FAULTS
    return True


def task_faults_at(job: dict[str, Any], epoch: int) -> int:
    return sum(f["kind"] in TASK_KINDS and f["epoch"] == epoch for f in job["faults"])


def unreported_at(job: dict[str, Any], epoch: int) -> bool:
    return any(f["kind"] in UNREPORTED_KINDS and f["epoch"] == epoch for f in job["faults"])


def kill_between_epoch(job: dict[str, Any]) -> int | None:
    return next((f["epoch"] for f in job["faults"] if f["kind"] == "kill_between_epochs"), None)


def place_fault(rng: random.Random, job: dict[str, Any], fault: Fault) -> None:
    """Put ``fault`` at a random epoch (within the per-epoch task budget) and record."""
    last = job["epochs"]
    at = 1
    if fault.kind == "finish":
        epoch = last  # the input ends in the last epoch only
    elif fault.kind == "kill_between_epochs":
        epoch = rng.choice([e for e in range(1, last) if not unreported_at(job, e)])
    elif fault.kind in TASK_KINDS:
        free = [e for e in range(1, last + 1) if task_faults_at(job, e) < TASK_FAULTS_PER_EPOCH]
        epoch = rng.choice(free)
        if fault.where == "process":  # some subtask always reaches that record
            at = rng.randint(1, job["per_epoch"] // (2 * job["parallelism"]))
    elif fault.kind in UNREPORTED_KINDS:
        epoch = rng.choice([e for e in range(1, last + 1) if e != kill_between_epoch(job)])
    else:
        epoch = rng.randint(1, last)
    job["faults"].append(Fault(fault.id, fault.where, fault.kind, at, epoch).to_json())


def count_rows(rows: list[dict[str, Any]], count: int) -> tuple[int, int]:
    """Duplicates (extra copies, ids out of range) and losses of ids 0..count-1."""
    seen = Counter(row["id"] for row in rows if row["id"] >= 0)
    duplicates = sum(n - 1 for n in seen.values()) + sum(1 for i in seen if i >= count)
    return duplicates, sum(1 for i in range(count) if i not in seen)


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_sink_exactly_once_under_random_faults(
    target_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = chaos_seed()
    label = f"chaos-sinks[{target_name}] seed={seed}"
    with capsys.disabled():
        print(f"\n{label} (set {SEED_VARIABLE}={seed} to run this plan again)")
    target = TARGETS[target_name](tmp_path)
    target.setup()
    try:
        plan = make_plan(seed, tmp_path, target_name)
        job = plan.jobs[0]
        started = time.perf_counter()
        runs = run_chain(plan, 0)
        seconds = time.perf_counter() - started
        result = runs[-1].result or {}
        assert result.get("outcome") == "finished", f"{label}: {result}\n{runs[-1].tail()}"

        fired = set(os.listdir(tmp_path / "markers"))
        missing = [fault.id for fault in plan.faults() if fault.id not in fired]
        faults = len(fired) + sum(run.killed_by_test for run in runs)
        rows = target.read_back()
        duplicates, losses = count_rows(rows, job["rows"])
        left = target.leftovers()
        summary = (
            f"{label} runs={len(runs)} faults={faults} rows={len(rows)} "
            f"duplicates={duplicates} losses={losses} left={len(left)} "
            f"(executes {result['executes']}, p={job['parallelism']}, "
            f"{job['epochs']} epochs of {job['per_epoch']}) in {seconds:.0f} s"
        )
        with capsys.disabled():
            print(summary)
        assert not missing, f"{summary}: planned faults that never fired: {missing}"
        assert duplicates == 0 and losses == 0, summary
        check_exactly_once(rows, job["rows"], drained=True)
        assert not left, f"{summary}: left behind: {left[:20]}"
        least = len(COMMIT_SIDE) if target_name in LIGHT_TARGETS else MIN_FAULTS
        assert len(fired) >= least, summary
    finally:
        target.teardown()


def test_every_seed_plans_enough_faults_within_the_budgets(tmp_path: Path) -> None:
    for seed in range(300):
        plan = make_plan(seed, tmp_path, "files")
        job = plan.jobs[0]
        faults = plan.faults()
        assert len(faults) >= MIN_FAULTS, seed
        assert {(f.where, f.kind) for f in faults} >= set(REQUIRED), seed
        for epoch in range(1, job["epochs"] + 1):
            assert task_faults_at(job, epoch) <= TASK_FAULTS_PER_EPOCH, (seed, epoch)
        assert sum(f.kind in COMMIT_KINDS for f in faults) <= COMMIT_FAULTS, seed
        between = kill_between_epoch(job)
        assert between is not None and not unreported_at(job, between), seed
        light = make_plan(seed, tmp_path, "postgres-subtask")
        assert {(f.where, f.kind) for f in light.faults()} == set(COMMIT_SIDE), seed
        between = kill_between_epoch(light.jobs[0])
        assert between is not None and not unreported_at(light.jobs[0], between), seed
        assert all(1 <= f.epoch <= job["epochs"] for f in faults), seed


def test_the_chaos_wrapper_forwards_every_sink_method() -> None:
    """A method the sink API gains must reach the wrapped sink, not the base's default."""
    methods = [
        name
        for name, value in vars(TwoPhaseCommitSink).items()
        if callable(value) and not name.startswith("_")
    ]
    assert "post_commit" in methods and "abort_uncommitted" in methods
    assert [name for name in methods if name not in vars(DelegatingSink)] == []


def test_the_chaos_wrapper_pickles_under_the_inner_sinks_name(tmp_path: Path) -> None:
    from pyspark import cloudpickle

    inner = TARGETS["files"](tmp_path).make_sink()
    fault = Fault("f00-sink-write", "sink", "write", 1, 3)
    wrapper = cloudpickle.loads(cloudpickle.dumps(FaultySink(inner, str(tmp_path), [fault])))
    assert wrapper.name == inner.name and wrapper.faults == [fault]
    assert wrapper.commits_beside_next_epoch is inner.commits_beside_next_epoch is True
    assert wrapper.committed_files() == []  # other attributes are the inner sink's
