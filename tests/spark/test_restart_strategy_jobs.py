"""Restart strategies on Spark: a job whose sink's commit fails once, or whose PostgreSQL
server goes down for 3 s mid-job, restarts by itself from its latest checkpoint and
finishes with every row once; when the failure persists past the strategy's attempts,
the job fails naming the cause and the restarts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
import unbounded_jobs
from postgres_server import start_server
from psycopg.rows import dict_row
from pyspark import cloudpickle
from sink_scenarios import check_exactly_once
from unbounded_jobs import OUT, CommitFailsOnceAt, build, committed_rows

from flintlock import FileSink, RestartStrategy
from flintlock.errors import CommitError
from flintlock.sinks.postgres import PostgresSink

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


def test_a_postgres_outage_mid_job_is_ridden_out_with_exponential_delay(
    tmp_path: Path, spark: Any
) -> None:
    server = start_server(max_prepared_transactions=20)
    try:
        sink = PostgresSink(server.conninfo(), "totals", schema=OUT)
        strategy = RestartStrategy.exponential_delay(300, 3000, jitter=0.0, attempts=10)
        env = build(spark, str(tmp_path), end=END, sink=sink, restart_strategy=strategy)
        outage: list[threading.Thread] = []

        def progress(figures: dict[str, Any]) -> None:
            if figures["epoch"] == 2 and not outage:  # after epoch 2's commit: down for 3 s
                outage.append(server.down_for(3.0))

        result = env.execute("outage", progress=progress)
        outage[0].join()
        assert result.status == "FINISHED"
        assert result.restarts >= 1
        with psycopg.connect(server.conninfo(), row_factory=dict_row) as connection:
            rows = connection.execute("SELECT k, id, total FROM totals").fetchall()
        check_exactly_once(rows, END, drained=True)
    finally:
        server.stop()
