"""The chaos recipe of Flink's JDBC exactly-once sink test: write ids 0..M-1, fail every
N records, restart from the last completed checkpoint, expect exactly the ids 0..M-1."""

from __future__ import annotations

import random

from flintlock.core.conformance.job import EpochEnd, KitRun
from flintlock.core.conformance.scenario import Scenario

TOTAL = 200
EVERY = 23
EPOCH_ROWS = 10
SEED = 35
FAULTS = (
    "task fails",
    "checkpoint never completes",
    "notice lost",
    "worker killed",
    "crash in the commit",
)


def fail_every_n_records(s: Scenario) -> None:
    """Ids 0..199 in epochs of 10 rows; at every 23rd record written (replays count),
    and once at the final epoch, a fault, each kind in turn: a subtask fails mid-epoch,
    or its worker is killed (no abort); the driver dies before the checkpoint completes,
    after it completed, or between the sinks' commit and its record. Each time a new run
    restarts from the last completed checkpoint (the kit's source offset is in its
    metadata); at the end readers see exactly the ids 0..199."""
    rng = random.Random(SEED)
    turn = rng.randrange(len(FAULTS))  # the faults take turns, from a seeded one
    job = s.job(outputs=("a", "b"))
    run = job.start()
    written, next_fault, final_failed = 0, EVERY, False
    while not run.finished:
        if turn > TOTAL:
            s.fail(f"the job did not finish after {turn} faults")
        count = min(EPOCH_ROWS, TOTAL - run.position)
        final = run.position + count == TOTAL
        written += count
        due = written >= next_fault or (final and not final_failed)
        if not due:
            run.checkpoint(count, "final" if final else "checkpoint")
            continue
        if written >= next_fault:
            next_fault += EVERY
        final_failed = final_failed or final
        _fail(run, FAULTS[turn % len(FAULTS)], count, final, rng)
        turn += 1
        run = job.start()
    s.expect("a", range(TOTAL))
    s.expect("b", range(TOTAL))


def _fail(run: KitRun, fault: str, count: int, final: bool, rng: random.Random) -> None:
    """Run one epoch of ``count`` ids that ends in ``fault``."""
    end: EpochEnd = "final" if final else "checkpoint"
    if fault == "task fails":
        run.epoch(count, end, cancel=rng.randrange(run.job.parallelism))
    elif fault == "worker killed":
        run.epoch(count, end, kill=rng.randrange(run.job.parallelism))
    elif fault == "checkpoint never completes":
        run.epoch(count, end)
    else:
        checkpoint = run.complete(run.epoch(count, end))
        if fault == "crash in the commit":
            run.commit_and_crash(checkpoint, ["a"])
