"""The commit that runs beside the next epoch (``core/job/run_commits.PendingCommit``):
one at a time, its error raised where the run waits, its follow-up run there."""

from __future__ import annotations

import threading

import pytest

from flintlock.core.job.run_commits import PendingCommit


def test_the_commit_runs_on_its_own_thread_and_its_follow_up_on_the_waiting_one() -> None:
    pending, threads, release = PendingCommit(), [], threading.Event()

    def commit() -> None:
        release.wait(10)
        threads.append(("commit", threading.current_thread().name))

    pending.start(commit, lambda: threads.append(("then", threading.current_thread().name)), "c1")
    assert pending.in_flight and threads == []  # the caller goes on while it runs
    release.set()
    pending.wait()
    assert threads == [("commit", "c1"), ("then", threading.current_thread().name)]
    assert not pending.in_flight
    pending.wait()  # nothing in flight: returns at once, runs nothing again
    assert len(threads) == 2


def test_a_failed_commit_is_raised_where_the_run_waits_and_skips_its_follow_up() -> None:
    pending, followed = PendingCommit(), []

    def commit() -> None:
        raise OSError("the store went away")

    pending.start(commit, lambda: followed.append(True), "c2")
    with pytest.raises(OSError, match="the store went away"):
        pending.wait()
    assert followed == [] and not pending.in_flight


def test_one_commit_at_a_time() -> None:
    pending, release = PendingCommit(), threading.Event()
    pending.start(lambda: release.wait(10) and None, lambda: None, "c3")
    with pytest.raises(RuntimeError, match="already in flight"):
        pending.start(lambda: None, lambda: None, "c4")
    release.set()
    pending.wait()


def test_when_the_run_fails_the_commits_own_error_becomes_a_note() -> None:
    pending = PendingCommit()

    def commit() -> None:
        raise OSError("commit failed too")

    pending.start(commit, lambda: None, "c5")
    failure = RuntimeError("the epoch failed")
    pending.wait_noting(failure)
    notes = getattr(failure, "__notes__", [])
    if hasattr(failure, "add_note"):
        assert notes == [
            "the commit running beside the failed epoch failed too: OSError: commit failed too"
        ]
    assert not pending.in_flight
