"""A job is (checkpoint dir, job name): names never collide, a job's folder and staging
files are its own, and a new run aborts its own leftovers, no one else's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.spark.sources import AQE, adaptive_execution_off
from flintlock.errors import CheckpointError, CommitError, SinkOutputError
from flintlock.sinks.files import FileSink


class CommitFailsOnce(FileSink):
    """A FileSink whose first commit fails before publishing anything."""

    def __init__(self, path: str, marker: Path, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.marker = str(marker)

    def commit(self, context: Any, committables: list[Any]) -> None:
        if not Path(self.marker).exists():
            Path(self.marker).write_text("failed once")
            raise OSError("injected: commit failed")
        super().commit(context, committables)


def values(path: Path) -> list[int]:
    return sorted(ds.dataset(str(path), format="parquet").to_table().column("v").to_pylist())


def job(
    spark: Any, checkpoint_dir: Path, rows: range, sink: FileSink
) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(checkpoint_dir))
    env.from_collection([{"v": i} for i in rows], batch_size=50).sink_to(sink)
    return env


def test_names_that_used_to_collide_run_their_own_rows(spark: Any, tmp_path: Path) -> None:
    chk = tmp_path / "chk"
    names = ["orders job", "orders/job", "orders_job"]
    first = CommitFailsOnce(str(tmp_path / "out0"), tmp_path / "marker")
    with pytest.raises(CommitError):  # 'orders job' leaves a pending commit
        job(spark, chk, range(0, 100), first).execute(names[0])
    for index in (1, 2):  # each runs its own rows; none completes the other's commit
        out = tmp_path / f"out{index}"
        job(spark, chk, range(index * 100, index * 100 + 100), FileSink(str(out))).execute(
            names[index]
        )
        assert values(out) == list(range(index * 100, index * 100 + 100))
    assert not list((tmp_path / "out0").glob("part-*"))  # still pending, not someone's
    result = job(spark, chk, range(0, 100), first).execute(names[0])
    assert result.resumed and values(tmp_path / "out0") == list(range(100))
    assert sorted(p.name for p in chk.iterdir()) == ["orders%20job", "orders%2Fjob", "orders_job"]


def test_same_name_other_checkpoint_dir_never_deletes_the_others_pending_files(
    spark: Any, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    failing = CommitFailsOnce(str(out), tmp_path / "marker")
    with pytest.raises(CommitError):
        job(spark, tmp_path / "chk-a", range(100), failing).execute("daily")
    pending = sorted(out.glob("_staging-*/*.parquet"))
    assert pending
    second = job(spark, tmp_path / "chk-b", range(100, 150), FileSink(str(out)))
    with pytest.raises(
        SinkOutputError,
        match=f"{out} has pending files of another job, job 'daily' "
        f"\\(checkpoint dir {tmp_path / 'chk-a'}\\)",
    ):
        second.execute("daily")
    beside = job(spark, tmp_path / "chk-b", range(100, 150), FileSink(str(out), mode="append"))
    beside.execute("daily")  # kept apart: its own staging folder
    assert all(p.exists() for p in pending)
    assert values(out) == list(range(100, 150))
    job(spark, tmp_path / "chk-a", range(100), failing).execute("daily")  # completes its commit
    assert values(out) == list(range(150))


def test_a_new_run_removes_its_jobs_dead_staging_files_only(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = job(spark, tmp_path / "c", range(2), FileSink(str(out)))
    first.execute("nightly")
    [registry] = (out / "_flintlock").iterdir()
    job_id = registry.stem
    mine = out / f"_staging-{job_id}" / "oldrun-chk1-0-99-0.parquet"
    theirs = out / "_staging-someoneelse" / "other-chk1-0-7-0.parquet"
    for path in (mine, theirs):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"left by a killed attempt")
    again = job(spark, tmp_path / "c", range(2), FileSink(str(out), mode="append"))
    again.execute("nightly", new_run=True)
    assert not mine.exists()
    assert theirs.exists()
    assert values(out) == [0, 0, 1, 1]  # append, asked for explicitly


def test_a_checkpoint_of_another_job_is_refused_before_anything_runs(
    spark: Any, tmp_path: Path
) -> None:
    chk = tmp_path / "chk"
    job(spark, chk, range(10), FileSink(str(tmp_path / "a"))).execute("hourly")
    job(spark, chk, range(10), FileSink(str(tmp_path / "b"))).execute("nightly")
    theirs = chk / "hourly/checkpoints/chk-1"
    copied = chk / "nightly/checkpoints/chk-2"
    copied.mkdir()
    (copied / "_metadata.json").write_bytes((theirs / "_metadata.json").read_bytes())
    (chk / "nightly/_result.json").unlink()  # as if the driver died before recording
    with pytest.raises(
        CheckpointError, match=f"{copied / '_metadata.json'} belongs to job 'hourly'"
    ):
        job(spark, chk, range(10), FileSink(str(tmp_path / "b"))).execute("nightly")


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
