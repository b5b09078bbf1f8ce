"""A task failure reaches the caller of execute() as a flintlock error naming job,
checkpoint, task, subtask, attempt, operator, phase, the user's code and the record —
without Spark's Java or Py4J stack; a crashed Python worker names its subtask."""

from __future__ import annotations

import os
import signal
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from job_scripts import flintlock_run, without_java

from flintlock import (
    CollectSink,
    FileSink,
    FlintlockError,
    LifecycleError,
    OneInputStreamOperator,
    StreamExecutionEnvironment,
)
from flintlock.errors import WorkerCrashedError


def price_of(row: dict[str, Any]) -> dict[str, Any]:
    return {"v": row["v"], "price": 100 // (row["v"] - 13)}  # row 13 divides by zero


def halve(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.set_column(0, "v", pc.divide(batch.column(0), 0))  # integer division by zero


def job(spark: Any, tmp_path: Path) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))


def no_java(error: BaseException) -> str:
    return without_java("".join(traceback.format_exception(error)))


def test_a_failing_per_record_map_names_everything_and_the_record(
    spark: Any, tmp_path: Path
) -> None:
    env = job(spark, tmp_path)
    rows = [{"v": i, "note": "x" * 1000 if i == 13 else ""} for i in range(40)]
    env.from_collection(rows, batch_size=10).map(price_of, name="price").sink_to(CollectSink())
    with pytest.raises(FlintlockError) as caught:
        env.execute("pricing")
    error = caught.value
    assert isinstance(error, LifecycleError)
    message = str(error)
    assert error.operator == "price" and error.operator_method == "process_batch"
    assert "operator 'price' failed in process_batch" in message
    assert "task: source 'source:collection -> price -> sink:collect', subtask " in message
    assert "job: 'pricing', run " in message and "checkpoint 1, Spark task attempt " in message
    assert "caused by: ZeroDivisionError: integer division or modulo by zero" in message
    assert 'return {"v": row["v"], "price": 100 // (row["v"] - 13)}' in message  # your line
    assert "in price_of" in message
    assert error.record is not None and error.record.startswith("{'v': 13, 'note': 'xxx")
    assert len(error.record) < 400  # truncated
    assert error.report.subtask_index in (0, 1) and error.report.attempt_number == 0
    printed = no_java(error)
    assert printed.count("operator 'price' failed") == 1


def test_a_failing_batch_function_names_operator_and_phase(spark: Any, tmp_path: Path) -> None:
    env = job(spark, tmp_path)
    env.from_collection([{"v": i} for i in range(10)]).map_batch(halve, name="halve").sink_to(
        CollectSink()
    )
    with pytest.raises(LifecycleError) as caught:
        env.execute("batch")
    assert caught.value.operator == "halve" and caught.value.record is None
    assert "in halve" in str(caught.value)
    no_java(caught.value)


class PreCommitFails(FileSink):
    def pre_commit(self, transaction: Any) -> list[Any]:
        raise OSError("injected: disk full")


def test_a_failing_pre_commit_names_the_snapshot_phase(spark: Any, tmp_path: Path) -> None:
    env = job(spark, tmp_path / "chk")
    env.from_collection([{"v": 1}]).sink_to(PreCommitFails(str(tmp_path / "out")), name="out")
    with pytest.raises(LifecycleError) as caught:
        env.execute("precommit")
    assert caught.value.phase == "snapshot" and caught.value.operator == "out"
    assert "caused by: OSError: injected: disk full" in str(caught.value)
    no_java(caught.value)


def die(row: dict[str, Any]) -> dict[str, Any]:
    if row["v"] == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return row


def test_a_killed_python_worker_names_vertex_and_subtask(spark: Any, tmp_path: Path) -> None:
    env = job(spark, tmp_path)
    env.from_collection([{"v": i} for i in range(8)], batch_size=4).rebalance().map(
        die, name="dies"
    ).sink_to(CollectSink())
    with pytest.raises(WorkerCrashedError) as caught:
        env.execute("crash")
    message = str(caught.value)
    assert "the Python worker running task 'dies -> sink:collect' subtask " in message
    assert "of job 'crash'" in message and "crashed" in message
    no_java(caught.value)


FAILING_JOB = """
from flintlock import StreamExecutionEnvironment

def explode(row):
    raise RuntimeError(f"no price for {row['v']}")

env = StreamExecutionEnvironment(parallelism=1)
env.from_collection([{"v": 1}]).map(explode, name="explode").print()
env.execute("cli-fails")
"""


def test_flintlock_run_prints_the_error_once_without_java(tmp_path: Path) -> None:
    done = flintlock_run(tmp_path / "failing_job.py", FAILING_JOB)
    assert done.returncode == 1
    err = without_java(done.stderr)
    assert err.count("operator 'explode' failed in process_batch") == 1, err
    assert "caused by: RuntimeError: no price for 1" in err
    assert "record: {'v': 1}" in err
    assert "Traceback (most recent call last)" not in err


class NeedsWorkerConfig(OneInputStreamOperator):
    """An operator whose constructor fails on the workers (a missing setting, say)."""

    def __init__(self) -> None:
        from pyspark import TaskContext

        if TaskContext.get() is not None:
            raise KeyError("SETTING_ONLY_ON_THE_DRIVER")


def test_an_operator_factory_failing_on_a_worker_names_the_operator(
    spark: Any, tmp_path: Path
) -> None:
    env = job(spark, tmp_path)
    env.from_collection([{"v": 1}]).transform("configured", NeedsWorkerConfig).sink_to(
        CollectSink()
    )
    with pytest.raises(LifecycleError) as caught:
        env.execute("factory")
    assert caught.value.operator == "configured"
    message = str(caught.value)
    assert message.startswith("operator 'configured' failed in its factory")
    assert "phase deploy" in message and "2nd of 3 in the chain" in message
    assert "KeyError: 'SETTING_ONLY_ON_THE_DRIVER'" in message
    assert "in __init__" in no_java(caught.value)
