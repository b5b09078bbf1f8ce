"""A job is (checkpoint dir, job name): a new run aborts its own leftovers, no one else's;
flintlock switches AQE off only for the job's duration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flintlock.core.datastream import StreamExecutionEnvironment
from flintlock.core.job_master import AQE, adaptive_execution_off
from flintlock.sinks.files import FileSink


def test_a_new_run_removes_its_jobs_dead_staging_files_only(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    mine = out / "_staging-nightly" / "oldrun-chk1-0-99-0.parquet"
    theirs = out / "_staging-hourly" / "other-chk1-0-7-0.parquet"
    for path in (mine, theirs):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"left by a killed attempt")
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path / "c"))
    env.from_collection([{"v": 1}, {"v": 2}]).sink_to(FileSink(str(out)))
    env.execute("nightly")
    assert not mine.exists()
    assert theirs.exists()
    assert len(list(out.glob("part-*.parquet"))) >= 1


def test_adaptive_execution_is_off_during_the_job_and_restored_after(spark: Any) -> None:
    spark.conf.set(AQE, "true")
    with adaptive_execution_off(spark):
        assert spark.conf.get(AQE) == "false"
    assert spark.conf.get(AQE) == "true"
    spark.conf.unset(AQE)
    default = spark.conf.get(AQE)
    with adaptive_execution_off(spark):
        assert spark.conf.get(AQE) == "false"
    assert spark.conf.get(AQE) == default
