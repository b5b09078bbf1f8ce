"""Errors that keep their cause on Spark: a worker Python without flintlock is refused
before the job, a Python error outside flintlock's operators leads the message, a
streaming job's failure is a flintlock error, a pandas DataFrame is read as it is."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from job_scripts import flintlock_run, without_java
from pyspark.sql import functions
from pyspark.sql.types import LongType

from flintlock import FlintlockError, LifecycleError, StreamExecutionEnvironment
from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.spark import helper_threads, worker_probe
from flintlock.errors import PythonTaskError, SparkSetupError, WorkerImportError

pytestmark = pytest.mark.slow


def job(spark: Any, tmp_path: Path, parallelism: int = 2) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=str(tmp_path / "chk")
    )


def printed(error: BaseException) -> str:
    return without_java("".join(traceback.format_exception(error)))


def test_a_worker_python_without_flintlock_is_refused_before_the_job(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = tmp_path / "bare"  # a venv of its own: no pyarrow, no flintlock
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    worker = str(bare / "bin" / "python")
    # what PYSPARK_PYTHON sets when the SparkContext starts
    monkeypatch.setattr(spark.sparkContext, "pythonExec", worker)
    env = job(spark, tmp_path)
    env.from_collection([{"v": 1}]).map(lambda row: row, name="same").print()
    with pytest.raises(SparkSetupError) as caught:
        env.execute("refused")
    message = str(caught.value)
    assert message.startswith("Spark's Python workers cannot run flintlock: the worker Python ")
    assert f"{worker} (Python " in message
    assert "cannot import pyarrow, cloudpickle, greenlet, pluggy, mmh3, numpy, flintlock" in message
    assert "(ModuleNotFoundError: No module named 'pyarrow')" in message
    assert "PYSPARK_PYTHON" in message and "spark.pyspark.python" in message
    assert f"this driver's {sys.executable}" in message
    assert not (tmp_path / "chk" / "refused").exists()  # refused before the job had a folder
    printed(caught.value)

    monkeypatch.setattr(spark.sparkContext, "pythonExec", sys.executable)
    assert env.execute("refused").status == "FINISHED"  # the fixed setting runs it
    key = (spark.sparkContext.applicationId, sys.executable)
    assert key in worker_probe._probed  # probed once: the next job does not ask again


def needs_a_missing_module(value: int) -> int:
    import no_such_module_for_flintlock  # noqa: F401

    return value


def test_a_python_error_in_the_input_dataframe_leads_the_message(
    spark: Any, tmp_path: Path
) -> None:
    udf = functions.udf(lambda value: needs_a_missing_module(value), LongType())
    frame = spark.range(4).select(udf("id").alias("id"))
    env = job(spark, tmp_path)
    env.from_dataframe(frame).print()
    with pytest.raises(PythonTaskError) as caught:
        env.execute("udf")
    message = str(caught.value)
    first, *rest = message.splitlines()
    assert first == "ModuleNotFoundError: No module named 'no_such_module_for_flintlock'"
    assert "raised by Python in a Spark task of job 'udf'" in rest[0]
    assert "in needs_a_missing_module" in message
    assert "import no_such_module_for_flintlock" in message
    assert isinstance(caught.value, FlintlockError)
    printed(caught.value)


def test_a_failing_streaming_job_raises_the_tasks_flintlock_error(
    spark: Any, tmp_path: Path
) -> None:
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"id": list(range(10))}), tmp_path / "in" / "0.parquet")

    def seven_fails(row: dict[str, Any]) -> dict[str, Any]:
        if row["id"] == 7:
            raise RuntimeError("no seven")
        return row

    env = job(spark, tmp_path, parallelism=1)
    frame = spark.readStream.schema("id long").parquet(str(tmp_path / "in"))
    env.from_stream(frame).map(
        seven_fails, name="seven", output_schema=pa.schema([("id", pa.int64())])
    ).print()
    with pytest.raises(LifecycleError) as caught:
        env.execute("stream", trigger=EpochTrigger.available_now())
    error = caught.value
    assert (error.operator, error.phase) == ("seven", "run")
    assert "caused by: RuntimeError: no seven" in str(error)
    assert "record: {'id': 7}" in str(error)
    assert "StreamingQueryException" not in printed(error)


def test_a_pandas_dataframe_is_read_as_its_rows(spark: Any, tmp_path: Path) -> None:
    frame = pd.DataFrame({"user": ["ada", "bob", "ada", "cy"], "amount": [5, 1, 2, 7]})
    env = job(spark, tmp_path)
    stream = env.from_dataframe(frame, name="payments")
    assert stream.schema == pa.schema([("user", pa.string()), ("amount", pa.int64())])
    assert stream.transformation.parallelism == 2  # split over the environment's subtasks
    table = stream.collect()
    rows = sorted((row["user"], row["amount"]) for row in table.to_pylist())
    assert rows == sorted(frame.itertuples(index=False, name=None))


PRINTS_THEN_FAILS = """
from pyspark.sql import functions
from pyspark.sql.types import LongType

from flintlock import StreamExecutionEnvironment
from flintlock.core.spark.session import active_or_local_session


def shout(row):
    print(f"saw {row['v']}")
    return row


def needs_a_missing_module(value):
    import no_such_module_for_flintlock

    return value


spark, _ = active_or_local_session()  # the embedded session, its log in a file
StreamExecutionEnvironment(parallelism=2).from_collection(
    [{"v": v} for v in range(5)]
).map(shout, name="shout").collect()
print("first job done", flush=True)
frame = spark.range(2).select(functions.udf(needs_a_missing_module, LongType())("id"))
StreamExecutionEnvironment(parallelism=2).from_dataframe(frame).collect()
"""


def test_flintlock_run_shows_prints_and_a_python_cause_with_sparks_log(tmp_path: Path) -> None:
    done = flintlock_run(tmp_path / "prints_then_fails.py", PRINTS_THEN_FAILS)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout.splitlines()
    assert sorted(out[:5]) == [f"saw {v}" for v in range(5)]  # print() in a task, here
    assert out[5] == "first job done"
    err = without_java(done.stderr)
    expected = "ModuleNotFoundError: No module named 'no_such_module_for_flintlock'"
    assert f"flintlock: job failed: {expected}\n" in err
    log = next(line for line in err.splitlines() if "Spark's own log: " in line)
    path = Path(log.split("Spark's own log: ", 1)[1].strip())
    assert path.name.startswith("flintlock-spark-") and path.exists()
    assert "no_such_module_for_flintlock" in path.read_text(errors="replace")  # Spark's stack


def test_the_tasks_print_folder_is_printed_then_removed_after_the_run(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a task prints reaches the driver after the epoch; the run's folder for it goes
    after the run, off the job's path (one removal thread, waited for here)."""

    def shout(row: dict[str, Any]) -> dict[str, Any]:
        print(f"row {row['id']}")
        return row

    before = set(Path(tempfile.gettempdir()).glob("flintlock-task-stdout-*"))
    env = job(spark, tmp_path, parallelism=1)
    env.from_dataframe(spark.range(0, 3, 1, 1)).map(shout).execute_and_collect("rows")
    assert capsys.readouterr().out.splitlines()[-3:] == ["row 0", "row 1", "row 2"]
    removal = helper_threads.helper_thread("folder-removal")
    removal.submit(lambda: None).result()  # the removals queued before it are done
    assert set(Path(tempfile.gettempdir()).glob("flintlock-task-stdout-*")) == before


def test_a_module_the_workers_cannot_import_names_the_operator_and_the_ways_out(
    spark: Any, tmp_path: Path
) -> None:
    package = tmp_path / "only_on_the_driver"
    package.mkdir()
    (package / "__init__.py").write_text("def double(row):\n    return {'v': row['v'] * 2}\n")
    sys.path.insert(0, str(tmp_path))  # the driver imports it; the workers cannot
    try:
        import only_on_the_driver  # type: ignore[import-not-found]

        env = job(spark, tmp_path)
        stream = env.from_collection([{"v": i} for i in range(10)])
        stream.map(only_on_the_driver.double, name="doubler").collect_async("out")
        with pytest.raises(WorkerImportError) as failure:
            env.execute("imports")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("only_on_the_driver", None)
    message = str(failure.value)
    assert "cannot import module 'only_on_the_driver', which operator 'doubler' uses" in message
    assert "spark.submit.pyFiles" in message
    assert "cloudpickle.register_pickle_by_value(only_on_the_driver)" in message
    assert "input DataFrame" not in message and "cloudpickle.loads" not in message
