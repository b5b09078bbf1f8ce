"""Python workers kept alive across long pauses between epochs: while a run waits for
its next epoch, a tiny stage (one task per core, under the job's keep-alive job group)
runs every FLINTLOCK_KEEP_ALIVE_SECONDS, so Spark's one-minute idle limit never stops
the workers an epoch is about to use (bench/worker_gap.py measures the pause itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.core.spark.keep_alive import KEEP_ALIVE_ENV, keep_alive_group

pytestmark = pytest.mark.slow


def run_paced_job(spark: Any, tmp_path: Path, name: str) -> list[int]:
    """Two epochs 3 s apart; the ids the job read."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    numbers = env.from_sequence(end=20, rows_per_epoch=10)
    numbers.sink_to(env.registry.get("sink", "collect")(name="ids", schema=numbers.schema))
    result = env.execute(name, trigger=EpochTrigger.processing_time(3.0))
    assert result.epochs == 2
    return sorted(result.collected["sink:ids"].column("id").to_pylist())


def test_a_waiting_run_touches_one_worker_per_core(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEEP_ALIVE_ENV, "1")
    assert run_paced_job(spark, tmp_path, "paced") == list(range(20))
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(keep_alive_group("paced"))
    assert 1 <= len(jobs) <= 3, jobs  # one per second of the ~3 s wait, none after the end
    for job in jobs:
        info = tracker.getJobInfo(job)
        assert info.status == "SUCCEEDED"
        (stage,) = info.stageIds
        assert tracker.getStageInfo(stage).numTasks == spark.sparkContext.defaultParallelism


def test_zero_turns_it_off(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEEP_ALIVE_ENV, "0")
    assert run_paced_job(spark, tmp_path, "unpaced") == list(range(20))
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(keep_alive_group("unpaced")) == []
