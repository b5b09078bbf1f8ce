"""Restart strategies on Spark: a job whose sink's commit fails once restarts by itself
from its latest checkpoint and finishes with every row once; without a strategy, or when
the failure persists past the strategy's attempts, the job fails naming the cause."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import unbounded_jobs
from pyspark import cloudpickle
from sink_scenarios import check_exactly_once
from unbounded_jobs import CommitFailsOnceAt, build, committed_rows

from flintlock import FileSink, RestartStrategy
from flintlock.errors import CommitError

cloudpickle.register_pickle_by_value(unbounded_jobs)
pytestmark = pytest.mark.slow
END = 1200  # four epochs of 300


class CommitAlwaysFailsAt(FileSink):
    """A FileSink whose commit of checkpoint 2 always fails (a store that stays down)."""

    def commit(self, context: Any, committables: list[Any]) -> None:
        if context.checkpoint_id == 2:
            raise OSError("injected: the store is down")
        super().commit(context, committables)


def test_a_failed_commit_restarts_the_job_which_finishes_with_every_row_once(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    sink = CommitFailsOnceAt(f"{base}/out", str(tmp_path / "failed-once"), checkpoint_id=2)
    strategy = RestartStrategy.exponential_delay(50, 500, jitter=0.0)
    env = build(spark, base, end=END, sink=sink, restart_strategy=strategy)
    result = env.execute("restarts")
    assert result.status == "FINISHED"
    assert result.restarts == 1
    assert result.restart_causes[0].startswith("CommitError: sink 'files' failed to commit")
    check_exactly_once(committed_rows(base), END, drained=True)


def test_a_persistent_failure_ends_the_job_after_the_strategys_attempts(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    sink = CommitAlwaysFailsAt(f"{base}/out")
    env = build(
        spark, base, end=END, sink=sink, restart_strategy=RestartStrategy.fixed_delay(2, 50)
    )
    with pytest.raises(CommitError, match="failed to commit checkpoint 2") as failed:
        env.execute("gives-up")
    assert "gave up after 2 restart(s)" in " ".join(failed.value.__notes__)
