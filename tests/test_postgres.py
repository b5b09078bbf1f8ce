"""PostgresSink against a real PostgreSQL server (tests/postgres_server.py), no Spark: the
writer and committer sides called as the task and the driver call them; read back with
psycopg."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from flintlock import CommittableError, PluginError, SinkOutputError
from flintlock.plugin_api import (
    CheckpointStorage,
    CommitContext,
    OutputCheckContext,
    SinkWriterContext,
    TaskInfo,
)
from flintlock.sinks import postgres_sql as pgsql
from flintlock.sinks.postgres import PostgresSink

JOB = "job0123456789abcdef"


@pytest.fixture
def storage(tmp_path: Path) -> CheckpointStorage:
    import pyarrow.fs as pafs

    return CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path / "chk"))


def committer(storage: CheckpointStorage, checkpoint: int, run: str = "run1") -> CommitContext:
    return CommitContext("pg-job", run, checkpoint, storage, job_id=JOB, sink_uid="out")


def write(
    sink: PostgresSink,
    storage: CheckpointStorage,
    checkpoint: int,
    batches: list[pa.RecordBatch],
    subtask: int = 0,
    attempt: int = 1,
    run: str = "run1",
) -> list[Any]:
    """One subtask's transaction of ``checkpoint``, written and pre-committed."""
    task = TaskInfo("sink", "one-input", subtask, 4, attempt_id=attempt, epoch=checkpoint,
                    run_id=run, job_name="pg-job", job_id=JOB)  # fmt: skip
    transaction = sink.begin_transaction(SinkWriterContext(task, storage, "out"), checkpoint)
    for batch in batches:
        sink.write(transaction, batch)
    sink.finish(transaction)
    return sink.pre_commit(transaction)


def ids(first: int, count: int) -> pa.RecordBatch:
    values = list(range(first, first + count))
    return pa.record_batch({"id": values, "name": [f"n{v}" for v in values]})


def query(conninfo: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo) as connection:
        cursor = connection.execute(statement)
        return cursor.fetchall() if cursor.description else []


def prepared(conninfo: str) -> list[str]:
    return [row[0] for row in query(conninfo, "SELECT gid FROM pg_prepared_xacts")]


def staged(conninfo: str) -> list[str]:
    """The transaction ids of the staging tables there, sorted."""
    with psycopg.connect(conninfo) as connection:
        return sorted(pgsql.staged(connection, "flintlock:"))


def test_rows_appear_at_commit_and_a_second_commit_changes_nothing(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "public.events")
    sink.abort_uncommitted(committer(storage, 0), [])
    committables = write(sink, storage, 1, [ids(0, 3), ids(3, 2)], subtask=0)
    committables += write(sink, storage, 1, [ids(100, 4)], subtask=1)
    assert [c["rows"] for c in committables] == [5, 4]
    assert query(pg_conninfo, "SELECT count(*) FROM events") == [(0,)]  # staged, invisible
    assert staged(pg_conninfo) == sorted(c["gid"] for c in committables)
    assert all(c["gid"].startswith(f"flintlock:{JOB}:") for c in committables)

    sink.commit(committer(storage, 1), committables)
    sink.commit(committer(storage, 1), committables)  # a killed driver commits again
    sink.abort_uncommitted(committer(storage, 0), committables)  # and starts again
    rows = query(pg_conninfo, "SELECT id, name FROM events ORDER BY id")
    assert rows == [(i, f"n{i}") for i in [0, 1, 2, 3, 4, 100, 101, 102, 103]]
    assert prepared(pg_conninfo) == [] and staged(pg_conninfo) == []
    markers = query(pg_conninfo, "SELECT checkpoint_id, subtask, row_count FROM flintlock_commits")
    assert sorted(markers) == [(1, 0, 5), (1, 1, 4)]

    later = write(sink, storage, 2, [ids(200, 1)])
    sink.commit(committer(storage, 2), later)  # forgets checkpoint 1's bookkeeping: done
    markers = query(pg_conninfo, "SELECT checkpoint_id, subtask FROM flintlock_commits")
    assert markers == [(2, 0)]
    assert query(pg_conninfo, "SELECT count(*) FROM events") == [(10,)]


def test_a_staging_table_gone_without_its_marker_is_lost_data(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "events")
    sink.abort_uncommitted(committer(storage, 0), [])
    committables = write(sink, storage, 1, [ids(0, 3)]) + write(sink, storage, 1, [ids(3, 1)], 1)
    query(pg_conninfo, f"DROP TABLE {pgsql.stage_table('events', committables[1]['gid'])}")
    with pytest.raises(CommittableError) as refused:
        sink.commit(committer(storage, 1), committables)
    message = str(refused.value)
    assert committables[1]["gid"] in message and "lost" in message and "new_run=True" in message
    assert query(pg_conninfo, "SELECT count(*) FROM events") == [(0,)]  # nothing half-done
    assert staged(pg_conninfo) == [committables[0]["gid"]]


def test_a_start_rolls_back_what_no_completed_checkpoint_references(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "kv", write="upsert", key_columns=["id"])
    sink.abort_uncommitted(committer(storage, 0), [])
    # an attempt staged its rows, then its task died: its staging table holds no lock
    dead = write(sink, storage, 1, [ids(0, 3)], attempt=7)
    retry = write(sink, storage, 1, [ids(0, 3)], attempt=8)
    assert staged(pg_conninfo) == sorted([dead[0]["gid"], retry[0]["gid"]])
    # the driver died before checkpoint 1 completed: the next start drops them all
    write(sink, storage, 1, [ids(10, 2)], subtask=1)
    sink.abort_uncommitted(committer(storage, 0, run="run2"), [])
    assert prepared(pg_conninfo) == [] and staged(pg_conninfo) == []
    assert query(pg_conninfo, "SELECT count(*) FROM kv") == [(0,)]
    with psycopg.connect(pg_conninfo) as connection:  # no lock is left on the keys
        connection.execute("SET lock_timeout = '2s'")
        connection.execute("INSERT INTO kv VALUES (0, 'free')")


def test_a_start_keeps_the_staged_rows_of_a_completed_checkpoint(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "events")
    sink.abort_uncommitted(committer(storage, 0), [])
    done = write(sink, storage, 4, [ids(0, 2)])
    unfinished = write(sink, storage, 5, [ids(2, 2)])  # the epoch after, never completed
    assert len(staged(pg_conninfo)) == 2
    sink.abort_uncommitted(committer(storage, 0, run="run2"), done)
    assert staged(pg_conninfo) == [done[0]["gid"]]
    sink.commit(committer(storage, 4), done)  # the commit that follows publishes it
    assert query(pg_conninfo, "SELECT id FROM events ORDER BY id") == [(0,), (1,)]
    assert staged(pg_conninfo) == []
    assert unfinished[0]["gid"] not in str(query(pg_conninfo, "SELECT gid FROM flintlock_commits"))


def test_an_empty_transaction_prepares_nothing_and_abort_drops_exactly_its_own(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "events")
    assert write(sink, storage, 1, []) == []
    assert write(sink, storage, 1, [ids(0, 0)], subtask=1) == []  # a batch without rows
    assert staged(pg_conninfo) == []
    task = TaskInfo("sink", "one-input", 0, 4, attempt_id=1, run_id="run1", job_id=JOB)
    first = sink.begin_transaction(SinkWriterContext(task, storage, "out"), 1)
    sink.write(first, ids(5, 1))
    sink.pre_commit(first)
    later = write(sink, storage, 1, [ids(0, 1)], attempt=10)
    assert staged(pg_conninfo) == sorted([first.gid, later[0]["gid"]])
    sink.abort(first)  # attempt 1's id is a prefix of attempt 10's: that one stays
    assert staged(pg_conninfo) == [later[0]["gid"]]
    sink.abort_uncommitted(committer(storage, 0), [])
    other = sink.begin_transaction(SinkWriterContext(task, storage, "out"), 2)
    sink.write(other, ids(6, 1))
    sink.abort(other)  # an open transaction: rolled back with its connection
    assert staged(pg_conninfo) == []
    assert query(pg_conninfo, "SELECT count(*) FROM events") == [(0,)]


def test_other_jobs_transactions_are_left_alone(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "events")
    mine = write(sink, storage, 1, [ids(0, 1)])
    other = CommitContext("other", "r", 0, storage, job_id="another-job", sink_uid="out")
    sink.abort_uncommitted(other, [])
    sink.abort_uncommitted(CommitContext("pg-job", "r", 0, storage, job_id=JOB, sink_uid="x"), [])
    assert staged(pg_conninfo) == [mine[0]["gid"]]


def test_upsert_keeps_the_last_row_per_key(pg_conninfo: str, storage: CheckpointStorage) -> None:
    sink = PostgresSink(pg_conninfo, "s1.kv", write="upsert", key_columns=["k"])
    query(pg_conninfo, "CREATE SCHEMA s1")
    batches = [
        pa.record_batch({"k": [1, 2, 1], "v": ["a", "b", "c"]}),
        pa.record_batch({"k": [2, 3], "v": ["d", None]}),
    ]
    sink.commit(committer(storage, 1), write(sink, storage, 1, batches))
    assert query(pg_conninfo, "SELECT k, v FROM s1.kv ORDER BY k") == [
        (1, "c"),
        (2, "d"),
        (3, None),
    ]
    again = pa.record_batch({"k": [3, 4], "v": ["e", "f"]})
    sink.commit(committer(storage, 2), write(sink, storage, 2, [again]))
    assert query(pg_conninfo, "SELECT k, v FROM s1.kv ORDER BY k") == [
        (1, "c"),
        (2, "d"),
        (3, "e"),
        (4, "f"),
    ]
    primary = query(
        pg_conninfo,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 's1.kv'::regclass AND i.indisprimary",
    )
    assert primary == [("k",)]
    stages = query(pg_conninfo, "SELECT relname FROM pg_class WHERE relname LIKE '_flintlock%'")
    assert stages == []


def test_the_table_is_created_from_the_arrow_schema_and_values_round_trip(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    when = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)
    batch = pa.record_batch(
        {
            "i": pa.array([1, None], pa.int32()),
            "s": pa.array(['a,"b"\nc', ""]),
            "none": pa.array([None, "x"]),
            "f": pa.array([1.5, math.inf]),
            "b": pa.array([True, None]),
            "ts": pa.array([when, None], pa.timestamp("us")),
            "tz": pa.array([when, None], pa.timestamp("ms", tz="UTC")),
            "d": pa.array([datetime.date(2024, 1, 31), None]),
            "n": pa.array([decimal.Decimal("12.34"), None], pa.decimal128(6, 2)),
            "cat": pa.array(["x", "y"]).dictionary_encode(),
        }
    )
    sink = PostgresSink(pg_conninfo, "typed")
    sink.commit(committer(storage, 1), write(sink, storage, 1, [batch]))
    types = query(
        pg_conninfo,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = 'typed' ORDER BY ordinal_position",
    )
    assert [t for _, t in types] == [
        "integer", "text", "text", "double precision", "boolean",
        "timestamp without time zone", "timestamp with time zone", "date", "numeric", "text",
    ]  # fmt: skip
    rows = query(pg_conninfo, "SELECT * FROM typed ORDER BY i NULLS LAST")
    utc = datetime.timezone.utc
    assert rows[0][:3] == (1, 'a,"b"\nc', None) and rows[0][3:] == (
        1.5, True, when, when.replace(microsecond=123000, tzinfo=utc),
        datetime.date(2024, 1, 31), decimal.Decimal("12.34"), "x",
    )  # fmt: skip
    assert rows[1] == (None, "", "x", math.inf, None, None, None, None, None, "y")


def test_an_existing_table_is_checked_against_the_rows(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    query(pg_conninfo, "CREATE TABLE t1 (id bigint, name integer, extra text NOT NULL)")
    sink = PostgresSink(pg_conninfo, "t1")
    with pytest.raises(SinkOutputError) as refused:
        write(sink, storage, 1, [ids(0, 1)])
    message = str(refused.value)
    assert "column 'name' is integer" in message and "NOT NULL column 'extra'" in message
    assert "PostgresSink 'out' of job 'pg-job' (table t1, checkpoint 1" in message

    query(pg_conninfo, "CREATE TABLE t2 (id numeric, name varchar(10), extra text DEFAULT 'd')")
    fits = PostgresSink(pg_conninfo, "t2", schema=ids(0, 1).schema)
    fits.check_output(OutputCheckContext("pg-job", "out"))  # on the driver, before Spark
    fits.commit(committer(storage, 1), write(fits, storage, 1, [ids(0, 2)]))
    assert query(pg_conninfo, "SELECT * FROM t2 ORDER BY id") == [(0, "n0", "d"), (1, "n1", "d")]

    upsert = PostgresSink(pg_conninfo, "t2", write="upsert", key_columns=["id"])
    with pytest.raises(SinkOutputError, match=r"unique index on exactly \(id\)"):
        write(upsert, storage, 2, [ids(0, 1)])
    with pytest.raises(SinkOutputError, match="cannot write column 'raw' of Arrow type binary"):
        PostgresSink(pg_conninfo, "t3", schema=pa.schema([("raw", pa.binary())]))


def test_output_modes(pg_conninfo: str, storage: CheckpointStorage) -> None:
    first = PostgresSink(pg_conninfo, "out_t", mode="error")
    first.prepare_output(committer(storage, 1))  # no table yet: fine
    first.commit(committer(storage, 1), write(first, storage, 1, [ids(0, 2)]))
    with pytest.raises(SinkOutputError, match=r"already holds rows.*mode='error'"):
        first.prepare_output(committer(storage, 2, run="run2"))
    # overwrite: the rows go at the new run's first commit, once
    replace = PostgresSink(pg_conninfo, "out_t", mode="overwrite")
    replace.prepare_output(committer(storage, 2, run="run2"))
    committables = write(replace, storage, 2, [ids(10, 1)], run="run2")
    assert query(pg_conninfo, "SELECT id FROM out_t ORDER BY id") == [(0,), (1,)]
    replace.commit(committer(storage, 2, run="run2"), committables)
    replace.commit(committer(storage, 2, run="run2"), committables)
    later = write(replace, storage, 3, [ids(11, 1)], run="run2")
    replace.commit(committer(storage, 3, run="run2"), later)
    assert query(pg_conninfo, "SELECT id FROM out_t ORDER BY id") == [(10,), (11,)]
    # a start that continues the job (no prepare_output) deletes nothing
    replace.commit(committer(storage, 4, run="run3"), write(replace, storage, 4, [ids(12, 1)]))
    assert query(pg_conninfo, "SELECT count(*) FROM out_t") == [(3,)]
    with pytest.raises(SinkOutputError, match="overwrite"):
        PostgresSink(pg_conninfo, "t", write="upsert", key_columns=["id"], mode="overwrite")


def test_a_server_with_postgresqls_default_settings_serves_exactly_once(
    postgres_without_2pc: Any, storage: CheckpointStorage
) -> None:
    """max_prepared_transactions = 0 (PostgreSQL's default): the sink prepares nothing,
    so it checks, writes, commits (twice: once) and cleans up there as anywhere."""
    conninfo = postgres_without_2pc.conninfo()
    sink = PostgresSink(conninfo, "events")
    sink.check_output(OutputCheckContext("pg-job", "out"))  # before Spark: not refused
    sink.abort_uncommitted(committer(storage, 1), [])
    committables = write(sink, storage, 1, [ids(0, 5)])
    sink.commit(committer(storage, 1), committables)
    sink.commit(committer(storage, 1), committables)  # repeated after a crash: adds nothing
    assert query(conninfo, "SELECT id FROM events ORDER BY id") == [(i,) for i in range(5)]


def test_an_unreachable_server_is_named_without_its_password(storage: CheckpointStorage) -> None:
    from postgres_server import free_port

    conninfo = f"postgresql://flint:s3cret@127.0.0.1:{free_port()}/db"
    with pytest.raises(PluginError) as refused:
        PostgresSink(conninfo, "events").check_output(OutputCheckContext("pg-job", "out"))
    message = str(refused.value)
    assert "cannot connect to PostgreSQL" in message and "127.0.0.1" in message
    assert "s3cret" not in message and "job 'pg-job'" in message


def test_a_database_error_on_the_driver_names_the_sink(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "events", markers_table="missing_schema.commits")
    with pytest.raises(SinkOutputError) as refused:
        sink.abort_uncommitted(committer(storage, 0), [])
    message = str(refused.value)
    assert "PostgresSink 'out' of job 'pg-job' (table events)" in message
    assert (
        'schema "missing_schema" does not exist' in message and "missing_schema.commits" in message
    )


def test_a_reader_never_sees_part_of_a_checkpoint(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "events")
    sink.abort_uncommitted(committer(storage, 0), [])
    per_subtask, subtasks, checkpoints = 25, 4, 20
    counts: list[int] = []
    done = threading.Event()

    def poll() -> None:
        with psycopg.connect(pg_conninfo, autocommit=True) as reader:
            while not done.is_set():
                counts.append(reader.execute("SELECT count(*) FROM events").fetchone()[0])

    write(sink, storage, 1, [ids(0, 1)])  # the table exists before the reader polls
    query(pg_conninfo, "DELETE FROM events")
    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for checkpoint in range(2, 2 + checkpoints):
            committables = []
            for subtask in range(subtasks):
                first = (checkpoint * subtasks + subtask) * per_subtask
                committables += write(sink, storage, checkpoint, [ids(first, per_subtask)], subtask)
            sink.commit(committer(storage, checkpoint), committables)
    finally:
        done.set()
        reader.join()
    whole = per_subtask * subtasks
    assert query(pg_conninfo, "SELECT count(*) FROM events") == [(checkpoints * whole,)]
    partial = sorted({count for count in counts if count % whole})
    assert partial == [], f"{len(counts)} reads saw part of a checkpoint: {partial}"


COMMIT_IN_ANOTHER_PROCESS = """
import json, sys
import pyarrow.fs as pafs
from flintlock.plugin_api import CheckpointStorage, CommitContext
from flintlock.sinks.postgres import PostgresSink
conninfo, folder, job, committables = sys.argv[1:]
storage = CheckpointStorage(pafs.LocalFileSystem(), folder)
context = CommitContext("pg-job", "run1", 1, storage, job_id=job, sink_uid="out")
PostgresSink(conninfo, "events").commit(context, json.loads(committables))
"""


def test_a_driver_killed_inside_the_commit_leaves_none_of_the_checkpoint_visible(
    pg_conninfo: str, storage: CheckpointStorage, tmp_path: Path
) -> None:
    sink = PostgresSink(pg_conninfo, "events")
    sink.abort_uncommitted(committer(storage, 0), [])
    committables = [c for s in range(3) for c in write(sink, storage, 1, [ids(s * 10, 10)], s)]
    # the driver publishes subtasks 0 and 1, then waits on the last staging table, locked
    with psycopg.connect(pg_conninfo) as locker:
        last_stage = pgsql.stage_table("events", committables[2]["gid"])
        locker.execute(f"LOCK TABLE {last_stage}")
        driver = subprocess.Popen(
            [sys.executable, "-c", COMMIT_IN_ANOTHER_PROCESS, pg_conninfo, str(tmp_path / "c"),
             JOB, json.dumps(committables)],
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            waiting = "SELECT query FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            while not query(pg_conninfo, waiting):
                assert driver.poll() is None and time.monotonic() < deadline, "never waited"
                time.sleep(0.05)
            [(statement,)] = query(pg_conninfo, waiting)  # subtasks 0 and 1 are in the table
            assert statement.startswith("INSERT INTO") and last_stage in statement
            assert query(pg_conninfo, "SELECT count(*) FROM events") == [(0,)]
        finally:
            driver.kill()  # SIGKILL, in the middle of the commit's transaction
            driver.wait()
    assert query(pg_conninfo, "SELECT count(*) FROM events") == [(0,)]  # none of it
    sink.commit(committer(storage, 1), committables)  # the next start commits it again
    sink.commit(committer(storage, 1), committables)
    sink.abort_uncommitted(committer(storage, 0, run="run2"), committables)
    rows = query(pg_conninfo, "SELECT id FROM events ORDER BY id")
    assert rows == [(i,) for i in range(30)]  # all of it, once
    assert staged(pg_conninfo) == [] and prepared(pg_conninfo) == []


def test_a_writer_kept_waiting_by_a_lock_on_the_table_names_it(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "events", lock_timeout="300ms")
    sink.commit(committer(storage, 1), write(sink, storage, 1, [ids(0, 1)]))  # the table exists
    with psycopg.connect(pg_conninfo) as locker:
        locker.execute("LOCK TABLE events")  # another program's ALTER TABLE, say
        with pytest.raises(SinkOutputError) as refused:
            write(sink, storage, 2, [ids(1, 1)])
    message = str(refused.value)
    assert "held a lock on table events for lock_timeout=300ms" in message
    assert "LOCK TABLE, ALTER TABLE or TRUNCATE" in message and "checkpoint 2" in message
    assert staged(pg_conninfo) == []  # the staging table went with its transaction


def test_per_subtask_visibility_writes_the_rows_once_and_commits_each_subtask(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(pg_conninfo, "events", visibility="subtask")
    sink.check_output(OutputCheckContext("pg-job", "out"))  # the server allows 2PC
    sink.abort_uncommitted(committer(storage, 0), [])
    dead = write(sink, storage, 1, [ids(0, 3)], attempt=1)  # its task died after PREPARE
    committables = write(sink, storage, 1, [ids(0, 3)], attempt=2)  # the retry rolls it back
    committables += write(sink, storage, 1, [ids(100, 4)], subtask=1)
    assert [c["prepared"] for c in committables] == [True, True]
    assert sorted(prepared(pg_conninfo)) == sorted(c["gid"] for c in committables)
    assert dead[0]["gid"] not in prepared(pg_conninfo) and staged(pg_conninfo) == []
    assert query(pg_conninfo, "SELECT count(*) FROM events") == [(0,)]  # prepared, invisible

    sink.commit(committer(storage, 1), committables)
    sink.commit(committer(storage, 1), committables)  # a killed driver commits again
    sink.abort_uncommitted(committer(storage, 0, run="run2"), committables)
    rows = query(pg_conninfo, "SELECT id FROM events ORDER BY id")
    assert rows == [(i,) for i in [0, 1, 2, 100, 101, 102, 103]]
    assert prepared(pg_conninfo) == [] and staged(pg_conninfo) == []
    markers = query(pg_conninfo, "SELECT checkpoint_id, subtask, row_count FROM flintlock_commits")
    assert sorted(markers) == [(1, 0, 3), (1, 1, 4)]

    unfinished = write(sink, storage, 2, [ids(200, 1)])  # its checkpoint never completed
    sink.abort_uncommitted(committer(storage, 0, run="run3"), committables)
    assert prepared(pg_conninfo) == [] and unfinished
    query(pg_conninfo, "DROP TABLE flintlock_commits")  # a lost prepared transaction:
    with pytest.raises(CommittableError, match=r"prepared transaction .* rolled back by hand"):
        sink.commit(committer(storage, 2), unfinished)  # neither prepared nor bookkept


def test_per_subtask_visibility_upserts_and_overwrites(
    pg_conninfo: str, storage: CheckpointStorage
) -> None:
    upsert = PostgresSink(
        pg_conninfo, "kv", write="upsert", key_columns=["k"], visibility="subtask"
    )
    batches = [pa.record_batch({"k": [1, 2, 1], "v": ["a", "b", "c"]})]
    upsert.commit(committer(storage, 1), write(upsert, storage, 1, batches))
    assert query(pg_conninfo, "SELECT k, v FROM kv ORDER BY k") == [(1, "c"), (2, "b")]
    assert staged(pg_conninfo) == []
    # overwrite deletes the old rows first, then commits the run's prepared rows
    first = PostgresSink(pg_conninfo, "over", visibility="subtask")
    first.commit(committer(storage, 1), write(first, storage, 1, [ids(0, 2)]))
    replace = PostgresSink(pg_conninfo, "over", mode="overwrite", visibility="subtask")
    replace.prepare_output(committer(storage, 2, run="run2"))
    committables = write(replace, storage, 2, [ids(10, 1)], run="run2")
    committables += write(replace, storage, 2, [ids(11, 1)], subtask=1, run="run2")
    replace.commit(committer(storage, 2, run="run2"), committables)
    replace.commit(committer(storage, 2, run="run2"), committables)
    assert query(pg_conninfo, "SELECT id FROM over ORDER BY id") == [(10,), (11,)]


def test_per_subtask_visibility_needs_prepared_transactions(
    postgres_without_2pc: Any, storage: CheckpointStorage
) -> None:
    sink = PostgresSink(postgres_without_2pc.conninfo(), "events", visibility="subtask")
    with pytest.raises(SinkOutputError) as refused:
        sink.check_output(OutputCheckContext("pg-job", "out"))  # before Spark starts
    message = str(refused.value)
    assert "max_prepared_transactions = 0" in message and "visibility='checkpoint'" in message
    with pytest.raises(SinkOutputError, match="visibility='partial' is not one of"):
        PostgresSink(postgres_without_2pc.conninfo(), "events", visibility="partial")


COMMIT_ONE_SUBTASK_THEN_DIE = """
import json, os, sys
import pyarrow.fs as pafs
from flintlock.plugin_api import CheckpointStorage, CommitContext
from flintlock.sinks.postgres import PostgresSink
class DiesAfterOneSubtask(PostgresSink):
    def _commit_prepared(self, connection, xid):
        super()._commit_prepared(connection, xid)
        os._exit(3)  # killed between two COMMIT PREPARED
conninfo, folder, job, committables = sys.argv[1:]
storage = CheckpointStorage(pafs.LocalFileSystem(), folder)
context = CommitContext("pg-job", "run1", 1, storage, job_id=job, sink_uid="out")
DiesAfterOneSubtask(conninfo, "events", visibility="subtask").commit(
    context, json.loads(committables)
)
"""


def test_per_subtask_visibility_a_driver_killed_between_subtask_commits(
    pg_conninfo: str, storage: CheckpointStorage, tmp_path: Path
) -> None:
    sink = PostgresSink(pg_conninfo, "events", visibility="subtask")
    sink.abort_uncommitted(committer(storage, 0), [])
    committables = [c for s in range(3) for c in write(sink, storage, 1, [ids(s * 10, 10)], s)]
    driver = subprocess.run(
        [sys.executable, "-c", COMMIT_ONE_SUBTASK_THEN_DIE, pg_conninfo, str(tmp_path / "c"),
         JOB, json.dumps(committables)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert driver.returncode == 3, driver.stderr
    # the reader sees subtask 0's rows of the checkpoint: what this visibility allows
    assert query(pg_conninfo, "SELECT id FROM events ORDER BY id") == [(i,) for i in range(10)]
    assert len(prepared(pg_conninfo)) == 2
    sink.abort_uncommitted(committer(storage, 0, run="run2"), committables)  # the next start
    sink.commit(committer(storage, 1, run="run2"), committables)
    rows = query(pg_conninfo, "SELECT id FROM events ORDER BY id")
    assert rows == [(i,) for i in range(30)]  # all of it, once
    assert prepared(pg_conninfo) == [] and staged(pg_conninfo) == []
