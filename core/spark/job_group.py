"""Spark's side of seeing a job: each epoch's Spark job carries the flintlock job's name,
epoch and checkpoint as its job group (a job tag where the caller set a group of its
own) and description (so Spark's UI names flintlock's work), and what Spark's status
tracker says about the epoch running now (stages, tasks).

One numbering, as everywhere a person reads it (the display, ``flintlock status``, the
metrics, ``result.epochs``): epoch N is the run's Nth epoch, and it completes checkpoint
``chk-<id>``, whose ids go on across runs. The job group, which must be unique, names the
checkpoint only.

The epoch running now is kept per flintlock job name on the driver, so a display polling
from another thread finds its Spark jobs without being told each epoch.
"""

from __future__ import annotations

import contextlib
import html
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GROUP = "spark.jobGroup.id"
DESCRIPTION = "spark.job.description"
INTERRUPT = "spark.job.interruptOnCancel"


@dataclass(frozen=True)
class EpochJob:
    """One epoch's Spark job group, as the driver set it."""

    job_name: str
    epoch: int
    """The run's epoch number (1 for its first)."""
    checkpoint_id: int
    """The checkpoint the epoch completes (unique in the job, across runs)."""
    group: str
    description: str
    started: float
    """time.monotonic() when the epoch's action began."""

    @property
    def tag(self) -> str:
        """The Spark job tag of the epoch where the group is not flintlock's (a tag has
        no commas)."""
        return self.group.replace(",", ";")


@dataclass(frozen=True)
class SparkProgress:
    """What Spark's status tracker says of one epoch's Spark jobs at one moment."""

    epoch: EpochJob
    jobs: int
    stages_done: int
    stages: int
    tasks_done: int
    tasks: int
    tasks_running: int

    @property
    def seconds(self) -> float:
        """Seconds since the epoch's action began."""
        return time.monotonic() - self.epoch.started


_running: dict[str, EpochJob] = {}
_page_paths: dict[str, str] = {}
"""Job name -> the path of Spark's UI that leads to its live page."""
_lock = threading.Lock()


def epoch_group(job_name: str, checkpoint_id: int, run_id: str) -> str:
    """The Spark job group of the epoch of a flintlock job's run that completes
    ``checkpoint_id``."""
    return f"flintlock:{job_name}:chk-{checkpoint_id}:run-{run_id}"


def epoch_description(job_name: str, epoch: int, checkpoint_id: int, run_id: str) -> str:
    """The Spark job description Spark's UI shows for a flintlock job's epoch: the run's
    epoch number and its checkpoint, as the display and the epoch lines say them; and a
    link to the job's live page where it has one (``link_page``)."""
    text = f"flintlock job '{job_name}' epoch {epoch} chk-{checkpoint_id} (run {run_id})"
    with _lock:
        path = _page_paths.get(job_name)
    if path is None:
        return text
    # Spark's UI draws a description as HTML when it parses (root-relative links only)
    return f'{html.escape(text, quote=False)} <a href="{html.escape(path)}">flintlock page</a>'


def link_page(job_name: str, path: str | None) -> None:
    """Have the descriptions of ``job_name``'s epochs link ``path`` of Spark's UI (which
    leads to the job's live page), or no longer (None)."""
    with _lock:
        if path is None:
            _page_paths.pop(job_name, None)
        else:
            _page_paths[job_name] = path


def running_epoch(job_name: str) -> EpochJob | None:
    """The epoch of ``job_name`` whose Spark action runs now, if any."""
    with _lock:
        return _running.get(job_name)


@contextlib.contextmanager
def epoch_running(job_name: str, epoch: int, checkpoint_id: int, run_id: str) -> Iterator[EpochJob]:
    """The run's epoch ``epoch`` of ``job_name``, completing ``checkpoint_id``, whose
    Spark action runs inside the block, as displays find it (``running_epoch``);
    ``RunSettings.epoch`` gives Spark the same labels."""
    job = EpochJob(
        job_name,
        epoch,
        checkpoint_id,
        epoch_group(job_name, checkpoint_id, run_id),
        epoch_description(job_name, epoch, checkpoint_id, run_id),
        time.monotonic(),
    )
    with _lock:
        _running[job_name] = job
    try:
        yield job
    finally:
        with _lock:
            if _running.get(job_name) is job:
                del _running[job_name]


def spark_progress(spark: SparkSession, job: EpochJob) -> SparkProgress | None:
    """Stages and tasks done of the epoch's Spark jobs, from the status tracker; None on
    Spark Connect (no status tracker) or if Spark is gone."""
    try:
        tracker = spark.sparkContext.statusTracker()
        stages_done = tasks_done = tasks = running = 0
        job_ids, stage_ids = epoch_spark_jobs(spark, job)
        for stage_id in stage_ids:
            stage: Any = tracker.getStageInfo(stage_id)
            if stage is None:  # not run: Spark skipped it, or it has not started
                continue
            tasks += stage.numTasks
            tasks_done += stage.numCompletedTasks
            running += stage.numActiveTasks
            stages_done += stage.numCompletedTasks == stage.numTasks
        return SparkProgress(
            job, len(job_ids), stages_done, len(stage_ids), tasks_done, tasks, running
        )
    except Exception:  # a status poll never fails the job
        return None


def epoch_spark_jobs(spark: SparkSession, job: EpochJob) -> tuple[list[int], list[int]]:
    """The ids of the epoch's Spark jobs and of their stages (its progress, links to
    Spark's UI)."""
    tracker = spark.sparkContext.statusTracker()
    job_ids = tracker.getJobIdsForGroup(job.group) or _job_ids_for_tag(spark, job.tag)
    stage_ids: list[int] = []
    for job_id in job_ids:
        info = tracker.getJobInfo(job_id)
        stage_ids.extend(info.stageIds if info is not None else ())
    return sorted(job_ids), sorted(stage_ids)


def _job_ids_for_tag(spark: SparkSession, tag: str) -> list[int]:
    """The ids of Spark's jobs tagged ``tag`` (an epoch run in its caller's job group)."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    return [int(job_id) for job_id in tracker.getJobIdsForTag(tag)]
