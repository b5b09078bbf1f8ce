"""The scenarios that found bugs in Flink's and Iceberg's committers, each on two sink
subtasks through the real lifecycle and the driver's real commit order. A driver crash
is a run that stops calling; the next ``start()`` replays the pending commit as the
coordinator does at a start (``core/job/run_start.py``), with sinks made anew."""

from __future__ import annotations

from flintlock.core.conformance.scenario import Scenario


def empty_checkpoints(s: Scenario) -> None:
    """Checkpoints with no rows at all, one with a row on one subtask only, and an empty
    final checkpoint: nothing appears twice, nothing is left staged."""
    run = s.job().start()
    run.checkpoint(0)
    s.check("out", [], "after an empty checkpoint")
    run.checkpoint(1)
    run.checkpoint(0)
    run.checkpoint(0, end="final")
    s.expect("out", [0])


def ordered_completion(s: Scenario) -> None:
    """Checkpoints completed and committed in order: a checkpoint's rows are invisible
    until its commit, visible after it."""
    run = s.job().start()
    for done in (10, 20, 30):
        checkpoint = run.complete(run.epoch(10))
        s.check("out", range(done - 10), f"checkpoint {checkpoint.checkpoint_id} not committed")
        run.commit(checkpoint)
        s.check("out", range(done), f"checkpoint {checkpoint.checkpoint_id} committed")
    run.checkpoint(5, end="final")
    s.expect("out", range(35))


def out_of_order_completion(s: Scenario) -> None:
    """Checkpoint 2's completion notice comes before 1's: the coordinator commits 1, then
    2, each once; a commit publishes every row of its checkpoint and no other's. (1's
    late notice is not passed on: the coordinator commits in checkpoint order only.)"""
    run = s.job().start()
    run.complete(run.epoch(12))
    s.check("out", [], "checkpoint 1 completed, not notified")
    second = run.complete(run.epoch(12))
    run.commit(second)
    s.check("out", range(24), "checkpoint 2's notice came before 1's")
    run.checkpoint(3, end="final")
    s.expect("out", range(27))


def subsumed_checkpoints(s: Scenario) -> None:
    """Two checkpoints committed at once: 1 and 2 completed, the driver died before
    either commit; the new run's start commits both, in order, each once."""
    job = s.job()
    run = job.start()
    run.complete(run.epoch(9))
    run.complete(run.epoch(9))
    s.check("out", [], "two checkpoints completed, the driver died")
    restarted = job.start()
    s.check("out", range(18), "the new run committed checkpoints 1 and 2 at once")
    restarted.checkpoint(4, end="final")
    s.expect("out", range(22))


def lost_notice_then_restart(s: Scenario) -> None:
    """The driver dies after checkpoint 2 completed, before its commit; a new run
    commits it at its start (nothing twice) and continues."""
    job = s.job()
    run = job.start()
    run.checkpoint(10)
    run.complete(run.epoch(10))  # the driver dies before the commit
    s.check("out", range(10), "the driver died before committing checkpoint 2")
    restarted = job.start()
    s.check("out", range(20), "a new run committed the pending checkpoint at its start")
    restarted.checkpoint(6, end="final")
    s.expect("out", range(26))


def commit_twice(s: Scenario) -> None:
    """Commit is idempotent: the same checkpoint committed twice in a row, and again
    after the driver died between the sinks' commit and its commit record."""
    job = s.job()
    run = job.start()
    checkpoint = run.complete(run.epoch(8))
    run.commit(checkpoint)
    run.commit(checkpoint)
    s.check("out", range(8), "checkpoint 1 committed twice")
    run.commit_and_crash(run.complete(run.epoch(8)), ["out"])
    restarted = job.start()  # commits checkpoint 2 again
    s.check("out", range(16), "checkpoint 2 committed again by a new run")
    restarted.checkpoint(4, end="final")
    s.expect("out", range(20))


def two_sinks_one_notified(s: Scenario) -> None:
    """Two sinks in one job: the driver commits the checkpoint to the first and dies
    before the second; the new run commits both (the first again, idempotently)."""
    job = s.job(outputs=("a", "b"))
    run = job.start()
    run.checkpoint(6)
    run.commit_and_crash(run.complete(run.epoch(6)), ["a"])
    s.check("a", range(12), "sink a committed checkpoint 2")
    s.check("b", range(6), "sink b was not notified of checkpoint 2")
    job.start().checkpoint(4, end="final")
    s.expect("a", range(16))
    s.expect("b", range(16))


def another_job_same_output(s: Scenario) -> None:
    """Another job writes the same output: each job's start and cleanup leaves the
    other's pending and committed rows alone; readers see both jobs' rows once."""
    mine, theirs = s.job("mine"), s.job("theirs", base=1000)
    run = mine.start()
    run.checkpoint(10)
    other = theirs.start()
    pending = other.epoch(10)  # pre-committed, its checkpoint not completed yet
    run.epoch(10)  # mine dies with this epoch pre-committed
    restarted = mine.start()  # drops what mine left, never theirs
    other.commit(other.complete(pending))
    s.check("out", [*range(10), *range(1000, 1010)], "both jobs committed one checkpoint")
    restarted.checkpoint(5, end="final")
    other.checkpoint(5, end="final")
    s.expect("out", [*range(15), *range(1000, 1015)])


def bounded_final_checkpoint(s: Scenario) -> None:
    """Bounded input: the last rows are flushed by finish, pre-committed in the final
    checkpoint and committed then; a start after it runs nothing and changes nothing."""
    job = s.job()
    run = job.start()
    run.checkpoint(10)
    run.checkpoint(13, end="final")
    s.check("out", range(23), "the final checkpoint committed")
    assert job.start().finished
    s.expect("out", range(23))


def stop_with_drain(s: Scenario) -> None:
    """Stop with drain: finish, then the savepoint ends the job; its rows committed."""
    job = s.job()
    run = job.start()
    run.checkpoint(10)
    run.checkpoint(7, end="drain")
    s.check("out", range(17), "the stop's savepoint committed")
    assert job.start().finished
    s.expect("out", range(17))


def stop_without_drain(s: Scenario) -> None:
    """Stop with a savepoint, no finish: the pre-committed rows are committed; a
    later run continues from it, each row once."""
    job = s.job()
    run = job.start()
    run.checkpoint(10)
    run.checkpoint(7, end="savepoint")
    s.check("out", range(17), "the stop's savepoint committed")
    job.start().checkpoint(5, end="final")
    s.expect("out", range(22))


def abort_after_pre_commit(s: Scenario) -> None:
    """A checkpoint every subtask pre-committed never completes (another task failed);
    a subtask fails mid-epoch (its writer aborts); a subtask's worker is killed mid-epoch
    (no abort). None of it is ever visible; a new run drops what they left and writes
    those ids again under the same checkpoint id."""
    job = s.job()
    run = job.start()
    run.checkpoint(10)
    run.epoch(10)  # pre-committed everywhere; the checkpoint never completes
    run.epoch(10, cancel=1)
    run.epoch(10, kill=0)
    s.check("out", range(10), "three epochs failed")
    job.start().checkpoint(10, end="final")
    s.expect("out", range(20))


def restart_at_another_parallelism(s: Scenario) -> None:
    """Runs at parallelism 2, 3, 1 and 2 again, killed workers and a pending checkpoint
    between them: what subtasks that no longer exist staged is cleaned up, and the
    pending checkpoint of 3 subtasks is committed whole by a run of 1."""
    job = s.job()
    run = job.start()
    run.checkpoint(10)
    run.epoch(10, kill=1)  # the run fails
    job.parallelism = 3
    job.start().epoch(9, kill=2)  # the run fails
    run = job.start()
    run.complete(run.epoch(9))  # the driver dies before the commit
    job.parallelism = 1
    run = job.start()
    s.check("out", range(19), "a run of 1 subtask committed a checkpoint of 3")
    run.epoch(6, kill=0)  # the run fails
    job.parallelism = 2
    job.start().checkpoint(6, end="final")
    s.expect("out", range(25))
