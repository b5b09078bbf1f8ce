"""A caller's cancel reaches a running job: each epoch's Spark job runs in the job group
the caller set around ``execute()``, so ``cancelJobGroup`` ends it early as JobCanceled,
recorded CANCELED."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.core.job.client import JobClient
from flintlock.core.spark.job_group import running_epoch
from flintlock.errors import JobCanceled

ELEMENTS = 200
SLEEP = 0.5
"""Seconds each element takes: the job would run 50 s on two subtasks."""


def slow(value: dict[str, Any]) -> dict[str, Any]:
    time.sleep(SLEEP)
    return value


def cancel_when_running(
    spark: Any, group: str, job_name: str, canceled_at: list[float]
) -> threading.Thread:
    """A thread that cancels ``group`` once the job's epoch has run two seconds."""

    def cancel() -> None:
        deadline = time.monotonic() + 120
        while running_epoch(job_name) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(2.0)
        canceled_at.append(time.monotonic())
        spark.sparkContext.cancelJobGroup(group)

    thread = threading.Thread(target=cancel, name="caller-cancel")
    thread.start()
    return thread


def test_the_callers_job_group_cancel_ends_the_job_as_canceled(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=2, checkpoint_dir=str(tmp_path))
    env.from_collection([{"v": i} for i in range(ELEMENTS)]).map(slow).print()
    context = spark.sparkContext
    context.setJobGroup("caller-group", "the caller's work", interruptOnCancel=True)
    canceled_at: list[float] = []
    canceler = cancel_when_running(spark, "caller-group", "slow", canceled_at)
    try:
        with pytest.raises(JobCanceled, match=r"job 'slow' .* was canceled: .*caller-group"):
            env.execute("slow")
    finally:
        canceler.join()
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.interruptOnCancel", None)
    assert time.monotonic() - canceled_at[0] < 15  # at the cancel, not at its end (50 s)
    assert context.getLocalProperty("spark.jobGroup.id") is None
    assert JobClient(str(tmp_path), "slow").status()["status"] == "CANCELED"


def test_a_cancel_of_the_callers_group_and_future_jobs_ends_the_job_between_epochs(
    spark: Any, tmp_path: Path
) -> None:
    """Between two epochs of an unbounded job no Spark job runs, so ``cancelJobGroup``
    has nothing to cancel; Spark's ``cancelJobGroupAndFutureJobs`` also cancels the
    group's next job, the next epoch, as soon as it starts."""
    env = StreamExecutionEnvironment(parallelism=2, checkpoint_dir=str(tmp_path))
    env.from_sequence(rows_per_epoch=10).print()
    context = spark.sparkContext
    context.setJobGroup("caller-between", "the caller's work", interruptOnCancel=True)
    canceled_at: list[float] = []

    def cancel_between_epochs() -> None:
        deadline = time.monotonic() + 120
        while running_epoch("between") is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the first epoch runs
        while running_epoch("between") is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # it ended: the run waits 4 s for the next
        canceled_at.append(time.monotonic())
        context._jsc.sc().cancelJobGroupAndFutureJobs("caller-between")

    canceler = threading.Thread(target=cancel_between_epochs, name="caller-cancel")
    canceler.start()
    try:
        with pytest.raises(JobCanceled, match=r"job 'between' .* was canceled: .*caller-between"):
            env.execute("between", trigger=EpochTrigger.processing_time(4.0))
    finally:
        canceler.join()
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.interruptOnCancel", None)
    assert time.monotonic() - canceled_at[0] < 15  # the next epoch, not a later one
    status = JobClient(str(tmp_path), "between").status()
    assert status["status"] == "CANCELED" and status["latest_checkpoint"] == 1
