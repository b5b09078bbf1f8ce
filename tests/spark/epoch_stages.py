"""What Spark ran for a job's epoch, read from its status tracker (test helper)."""

from __future__ import annotations

from typing import Any

from flintlock.core.spark.job_group import epoch_group


def stage_task_counts(spark: Any, result: Any) -> list[int]:
    """The number of tasks of each Spark stage a job's one epoch ran (checkpoint 1), in
    stage order: its Spark jobs are the epoch's job group."""
    group = epoch_group(result.job_name, 1, result.run_id)
    tracker = spark.sparkContext.statusTracker()
    stages = sorted(
        stage
        for job in tracker.getJobIdsForGroup(group)
        for stage in tracker.getJobInfo(job).stageIds
    )
    return [tracker.getStageInfo(stage).numTasks for stage in stages]
