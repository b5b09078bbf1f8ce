"""A commit that fails halfway is completed exactly once by the next start of the job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import killed_driver_job
import pyarrow.dataset as ds
import pytest
from killed_driver_job import CommitDiesAfterOneFile
from pyspark import cloudpickle

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.errors import CommitError
from flintlock.sinks.files import FileSink

cloudpickle.register_pickle_by_value(killed_driver_job)  # workers cannot import tests/


def build(spark: Any, tmp_path: Path) -> tuple[StreamExecutionEnvironment, FileSink]:
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=str(tmp_path / "chk")
    )
    sink = CommitDiesAfterOneFile(str(tmp_path / "out"), str(tmp_path / "marker"))
    env.from_collection([{"v": i} for i in range(1000)], batch_size=50).sink_to(sink)
    return env, sink


def test_failed_commit_then_restart_gives_every_row_exactly_once(
    spark: Any, tmp_path: Path
) -> None:
    env, sink = build(spark, tmp_path)
    with pytest.raises(CommitError, match="sink 'sink:files' failed to commit checkpoint 1"):
        env.execute("halfway")
    assert len(sink.committed_files()) == 1  # one file moved before the failure

    [staging_dir] = (tmp_path / "out").glob("_staging-*")
    dead = staging_dir / "deadrun-chk1-0-99-0.parquet"  # left by a killed attempt
    dead.write_bytes(b"partial")
    again, _ = build(spark, tmp_path)
    result = again.execute("halfway")
    assert not dead.exists()  # completing the commit also aborts what nothing references
    assert result.resumed and result.checkpoint_id == 1  # the pending commit, not a new run
    table = ds.dataset(str(tmp_path / "out"), format="parquet").to_table()
    assert sorted(table.column("v").to_pylist()) == list(range(1000))
    assert not list((tmp_path / "out").glob("_staging-*/*"))

    third, _ = build(spark, tmp_path)
    stored = third.execute("halfway")  # finished: the stored result, nothing runs again
    assert stored.already_finished and stored.checkpoint_id == 1
    assert sorted(ds.dataset(str(tmp_path / "out")).to_table().column("v").to_pylist()) == list(
        range(1000)
    )
