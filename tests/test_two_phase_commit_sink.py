"""Writing your own 2PC sink: a JSON-lines sink, tested in the harness and on Spark.

The same sink is walked through in CONTRIBUTING.md ("Write your own 2PC sink").
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import LifecycleError, TwoPhaseCommitSink
from flintlock.operators.sink import TwoPhaseCommitSinkOperator
from flintlock.testing import OneInputHarness


class JsonLinesSink(TwoPhaseCommitSink):
    """Rows as JSON lines: one staging file per subtask attempt, renamed on commit."""

    name = "jsonl"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def begin_transaction(self, context: Any, checkpoint_id: int) -> dict[str, Any]:
        task = context.task
        stem = f"{task.run_id}-{checkpoint_id}-{task.subtask_index}"
        staging = f"{self.folder}/_staging-{task.job_id}/{stem}-{task.attempt_id}.jsonl"
        os.makedirs(os.path.dirname(staging), exist_ok=True)
        final = f"{self.folder}/part-{stem}.jsonl"
        return {"file": open(staging, "w"), "staging": staging, "final": final}

    def write(self, transaction: dict[str, Any], batch: pa.RecordBatch) -> None:
        transaction["file"].writelines(json.dumps(row) + "\n" for row in batch.to_pylist())

    def finish(self, transaction: dict[str, Any]) -> None:
        transaction["file"].flush()  # the last rows reach the staging file

    def pre_commit(self, transaction: dict[str, Any]) -> list[Any]:
        transaction["file"].close()
        return [{"staging": transaction["staging"], "final": transaction["final"]}]

    def abort(self, transaction: dict[str, Any]) -> None:
        transaction["file"].close()
        os.remove(transaction["staging"])

    def commit(self, context: Any, committables: list[Any]) -> None:
        for file in committables:
            if os.path.exists(file["staging"]):  # idempotent: done if already renamed
                os.replace(file["staging"], file["final"])


def committed_rows(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for part in sorted(folder.glob("part-*.jsonl"))
        for line in part.read_text().splitlines()
    ]


def test_jsonl_sink_in_the_harness_commits_only_after_the_checkpoint(tmp_path: Path) -> None:
    sink = JsonLinesSink(str(tmp_path))
    harness = OneInputHarness(TwoPhaseCommitSinkOperator(sink, name="jsonl"))
    harness.process_records([{"v": 1}, {"v": 2}])
    harness.complete(checkpoint_id=1)
    assert committed_rows(tmp_path) == []  # written, pre-committed, not yet visible
    committed = harness.commit(sink)
    assert len(committed) == 1
    assert committed_rows(tmp_path) == [{"v": 1}, {"v": 2}]
    harness.commit(sink)  # a second commit of the same checkpoint changes nothing
    assert committed_rows(tmp_path) == [{"v": 1}, {"v": 2}]


def test_a_failed_task_aborts_its_transaction(tmp_path: Path) -> None:
    sink = JsonLinesSink(str(tmp_path))
    harness = OneInputHarness(TwoPhaseCommitSinkOperator(sink, name="jsonl"))
    harness.process_records([{"v": 1}])
    with pytest.raises(LifecycleError):
        harness.process_records([{"v": b"bytes are not JSON"}])  # write() raises
    assert list(tmp_path.rglob("*.jsonl")) == []


def test_jsonl_sink_on_spark_writes_every_row_once(spark: Any, tmp_path: Path) -> None:
    from flintlock import StreamExecutionEnvironment

    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path / "c"))
    env.from_collection([{"v": i} for i in range(100)], batch_size=7).sink_to(
        JsonLinesSink(str(tmp_path / "out"))
    )
    env.execute("jsonl")
    assert sorted(r["v"] for r in committed_rows(tmp_path / "out")) == list(range(100))
