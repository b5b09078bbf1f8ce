"""A sink's output is checked before Spark starts (``TwoPhaseCommitSink.check_output``):
a table that does not fit the stream, a server out of reach or without prepared
transactions is a flintlock error naming the sink, the table and the mismatch, raised by
``execute()`` before it asks for a Spark session (a guard fails the test if it does), and
in a fresh process before any JVM is started. Real PostgreSQL servers
(tests/postgres_server.py), real Delta tables and a real Iceberg SQL catalog."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from postgres_server import free_port

from flintlock import PluginError, SinkOutputError, StreamExecutionEnvironment
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.datastream import environment
from flintlock.core.job.checks import finished_before
from flintlock.plugin_api import CommitContext, OutputCheckContext
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.delta import DeltaSink
from flintlock.sinks.iceberg import IcebergSink
from flintlock.sinks.postgres import PostgresSink

ROWS = [{"id": 1, "name": "ada"}, {"id": 2, "name": "bob"}]
SPARK_REACHED = "execute() reached the Spark session"


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if execute() gets as far as asking for a Spark session."""

    def spark_would_start(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{SPARK_REACHED}: the check came too late")

    monkeypatch.setattr(environment, "active_or_local_session", spark_would_start)


def run_into(sink: Any, tmp_path: Path, job_name: str = "load") -> None:
    """Run a job writing ROWS into ``sink`` (named 'out')."""
    env = StreamExecutionEnvironment(parallelism=2, checkpoint_dir=str(tmp_path / "chk"))
    env.from_collection(ROWS).sink_to(sink, name="out")
    env.execute(job_name)


def sql(conninfo: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        cursor = connection.execute(statement)
        return cursor.fetchall() if cursor.description else []


# ---- PostgreSQL ----


def test_a_postgres_table_that_does_not_fit_the_stream_is_refused_before_spark(
    no_spark: None, pg_conninfo: str, tmp_path: Path
) -> None:
    sql(pg_conninfo, "CREATE TABLE events (id bigint, name integer)")
    with pytest.raises(SinkOutputError) as refused:
        run_into(PostgresSink(pg_conninfo, "events"), tmp_path)  # no schema=: the stream's
    message = str(refused.value)
    assert "PostgresSink 'out' of job 'load' (table events)" in message
    assert "column 'name' is integer, the rows bring string (text)" in message
    assert sql(pg_conninfo, "SELECT count(*) FROM events") == [(0,)]


def test_an_unreachable_postgres_is_refused_before_spark(no_spark: None, tmp_path: Path) -> None:
    conninfo = f"postgresql://flint:s3cret@127.0.0.1:{free_port()}/shop"  # a closed port
    with pytest.raises(PluginError) as refused:
        run_into(PostgresSink(conninfo, "events"), tmp_path)
    message = str(refused.value)
    assert "PostgresSink 'out' of job 'load' (table events)" in message
    assert "cannot connect to PostgreSQL at" in message and "127.0.0.1" in message
    assert "s3cret" not in message


def test_a_finished_job_is_not_refused_by_its_outputs(
    no_spark: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start that only returns a finished run's stored result checks no output: it
    gets as far as the Spark session, where the guard stops it."""
    storage = CheckpointStorage.from_uri(str(tmp_path / "chk"))
    folder = JobFolder(storage, "load")
    folder.open()
    assert not finished_before(str(tmp_path / "chk"), "load")
    folder.record_finished("run1", 1, {})
    assert finished_before(str(tmp_path / "chk"), "load")
    assert not finished_before(str(tmp_path / "chk"), "another")
    closed = f"host=127.0.0.1 port={free_port()} dbname=shop user=flint"
    with pytest.raises(AssertionError, match=re.escape(SPARK_REACHED)):
        run_into(PostgresSink(closed, "events"), tmp_path)
    monkeypatch.setenv("FLINTLOCK_NEW_RUN", "1")  # a new run writes: its output is checked
    with pytest.raises(PluginError, match="cannot connect to PostgreSQL"):
        run_into(PostgresSink(closed, "events"), tmp_path)


def test_the_driver_checks_a_postgres_table_in_a_process_that_starts_no_jvm(
    pg_conninfo: str, tmp_path: Path
) -> None:
    sql(pg_conninfo, "CREATE TABLE events (id text, name text, extra text NOT NULL)")
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from flintlock import StreamExecutionEnvironment
        from flintlock.sinks.postgres import PostgresSink
        started = time.monotonic()
        env = StreamExecutionEnvironment(parallelism=2, checkpoint_dir={str(tmp_path)!r})
        env.from_collection({ROWS!r}).sink_to(PostgresSink({pg_conninfo!r}, "events"))
        try:
            env.execute("load")
            error = None
        except Exception as caught:
            error = caught
        from pyspark import SparkContext
        print(json.dumps({{
            "error": type(error).__name__,
            "message": str(error),
            "jvm_started": SparkContext._gateway is not None,
            "seconds": time.monotonic() - started,
        }}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["error"] == "SinkOutputError" and not outcome["jvm_started"], outcome
    assert "table events does not fit" in outcome["message"]
    assert "column 'id' is text, the rows bring int64" in outcome["message"]
    assert "NOT NULL column 'extra'" in outcome["message"]
    assert outcome["seconds"] < 20, outcome  # no Spark start, no task retries


# ---- Delta Lake ----


def test_a_delta_table_that_does_not_fit_the_stream_is_refused_before_spark(
    no_spark: None, tmp_path: Path
) -> None:
    uri = tmp_path / "events"
    write_deltalake(str(uri), pa.table({"id": pa.array(["1"]), "name": pa.array(["x"])}))
    with pytest.raises(SinkOutputError) as refused:
        run_into(DeltaSink(str(uri), mode="append"), tmp_path)
    message = str(refused.value)
    assert f"the stream does not fit the Delta table {uri}" in message
    assert "column 'id' is int64 in the stream, string in the table" in message
    assert "job 'load', sink 'out'" in message


# ---- Apache Iceberg ----


def test_an_iceberg_table_that_does_not_fit_the_stream_is_refused_before_spark(
    no_spark: None, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    table_schema = pa.schema([("id", pa.int64()), ("name", pa.int64())])
    storage = CheckpointStorage.from_uri(str(tmp_path / "other"))
    IcebergSink("shop.events", warehouse=warehouse, schema=table_schema).prepare_output(
        CommitContext("maker", "run0", 1, storage, "job0", "out")
    )  # creates the table
    with pytest.raises(SinkOutputError) as refused:
        run_into(IcebergSink("shop.events", warehouse=warehouse, mode="append"), tmp_path)
    message = str(refused.value)
    assert "the stream's schema does not fit Iceberg table shop.events" in message
    assert "column 'name' is string, the table's is long" in message
    assert "job 'load' wrote nothing" in message


# ---- any sink ----


class RefusingSink(CollectSink):
    """A sink whose own check fails with an error that is no flintlock error."""

    def check_output(self, context: OutputCheckContext) -> None:
        raise ValueError(f"no room for {context.sink_uid}")


def test_a_sinks_own_check_failing_is_a_sink_output_error_naming_it(
    no_spark: None, tmp_path: Path
) -> None:
    with pytest.raises(SinkOutputError) as refused:
        run_into(RefusingSink("out"), tmp_path)
    assert str(refused.value) == (
        "sink 'out' (RefusingSink) of job 'load' failed checking its output: "
        "ValueError: no room for out"
    )
    assert isinstance(refused.value.__cause__, ValueError)
