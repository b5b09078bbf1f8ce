"""DeltaSink without Spark (its Spark scenarios: tests/spark/test_delta_sink.py): its writer
and committer driven call by call on real Delta tables, read back with deltalake's reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from delta_tables import read_delta
from deltalake import DeltaTable, write_deltalake
from s3_server import BUCKET, S3Server

from flintlock import CommittableError, SinkOutputError
from flintlock.plugin_api import CheckpointStorage, CommitContext, SinkWriterContext, TaskInfo
from flintlock.sinks.delta import DeltaSink

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("name", pa.string())])


class Job:
    """One job's sink, its checkpoint storage, and the contexts the runtime would hand it."""

    def __init__(self, tmp_path: Path, sink: DeltaSink, job_id: str = "job1") -> None:
        self.sink = sink
        self.storage = CheckpointStorage.from_uri(str(tmp_path / "chk"))
        self.job_id = job_id

    def write(
        self,
        checkpoint_id: int,
        ids: list[int],
        run: str = "run1",
        subtask: int = 0,
        attempt: int = 0,
    ) -> list[Any]:
        """One subtask attempt's transaction of ``ids``, pre-committed: its committables."""
        task = TaskInfo(
            "sink", "one-input", subtask, 2, attempt_id=attempt, run_id=run, job_id=self.job_id
        )
        transaction = self.sink.begin_transaction(
            SinkWriterContext(task, self.storage, "out"), checkpoint_id
        )
        self.sink.write(transaction, batch(ids))
        self.sink.finish(transaction)
        return self.sink.pre_commit(transaction)

    def context(self, checkpoint_id: int, run: str = "run1") -> CommitContext:
        return CommitContext("orders", run, checkpoint_id, self.storage, self.job_id, "out")

    def commit(self, checkpoint_id: int, committables: list[Any], run: str = "run1") -> None:
        self.sink.commit(self.context(checkpoint_id, run), committables)


def batch(ids: list[int]) -> pa.RecordBatch:
    return pa.record_batch(
        {"id": ids, "p": [f"p{i % 2}" for i in ids], "name": [f"n{i}" for i in ids]},
        schema=SCHEMA,
    )


def ids_in(uri: Path) -> list[int]:
    return read_delta(uri).column("id").to_pylist()


def data_files(uri: Path) -> list[str]:
    return sorted(
        str(p.relative_to(uri)) for p in uri.rglob("*.parquet") if "_delta_log" not in p.parts
    )


def test_a_checkpoint_committed_twice_is_in_the_table_once(tmp_path: Path) -> None:
    job = Job(tmp_path, DeltaSink(str(tmp_path / "t")))
    job.sink.prepare_output(job.context(1))
    committables = job.write(1, [1, 2], subtask=0) + job.write(1, [3], subtask=1)
    assert not (tmp_path / "t" / "_delta_log").exists()  # written, not yet a table
    job.commit(1, committables)
    job.commit(1, committables)  # the driver died after the commit: it runs again
    table = DeltaTable(str(tmp_path / "t"))
    assert ids_in(tmp_path / "t") == [1, 2, 3]
    assert table.version() == 0
    assert table.transaction_version("flintlock-job1-out") == 1
    job.commit(2, job.write(2, [4]))
    assert ids_in(tmp_path / "t") == [1, 2, 3, 4]
    assert DeltaTable(str(tmp_path / "t")).transaction_version("flintlock-job1-out") == 2


def test_a_crash_between_the_delta_commit_and_flintlocks_record(tmp_path: Path) -> None:
    job = Job(tmp_path, DeltaSink(str(tmp_path / "t"), mode="append"))
    job.commit(1, job.write(1, [1, 2]))
    pending = job.write(2, [3, 4])
    job.commit(2, pending)  # in the table; flintlock's record of it never written
    restarted = Job(tmp_path, DeltaSink(str(tmp_path / "t"), mode="append"))
    restarted.sink.abort_uncommitted(restarted.context(2, "run2"), keep=pending)
    restarted.commit(2, pending)  # a start completes the pending commit again
    assert ids_in(tmp_path / "t") == [1, 2, 3, 4]
    assert DeltaTable(str(tmp_path / "t")).version() == 1
    restarted.sink.abort_uncommitted(restarted.context(2, "run2"), keep=[])
    assert ids_in(tmp_path / "t") == [1, 2, 3, 4]  # committed files are never removed


def test_files_no_completed_checkpoint_references_are_removed(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    job = Job(tmp_path, DeltaSink(str(uri), mode="append"))
    lost_attempt = job.write(1, [1, 2], attempt=7)  # a task attempt that failed
    committed = job.write(1, [1, 2], attempt=8) + job.write(1, [3], subtask=1)
    job.commit(1, committed)
    assert not {f["path"] for f in lost_attempt} & set(data_files(uri))
    dead_run = job.write(2, [5, 6], run="run1")  # the run died before checkpoint 2 completed
    other_job = Job(tmp_path, DeltaSink(str(uri), mode="append"), job_id="job2").write(1, [9])
    assert len(data_files(uri)) == 4
    job.sink.abort_uncommitted(job.context(2, "run2"), keep=[])
    assert sorted(data_files(uri)) == sorted(f["path"] for f in committed + other_job)
    assert not {f["path"] for f in dead_run} & set(data_files(uri))
    assert ids_in(uri) == [1, 2, 3]


def test_a_stream_that_does_not_fit_the_table_is_refused_naming_the_columns(
    tmp_path: Path,
) -> None:
    uri = tmp_path / "t"
    write_deltalake(str(uri), pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]}))
    sink = DeltaSink(str(uri), mode="append")
    sink.input_schema = SCHEMA.set(0, pa.field("id", pa.string()))
    job = Job(tmp_path, sink)
    with pytest.raises(SinkOutputError) as refused:
        sink.prepare_output(job.context(1))
    message = str(refused.value)
    assert "column 'id' is string in the stream, int64 in the table" in message
    assert "column 'p' is not in the table" in message
    assert "job 'orders', sink 'out'" in message
    sink.input_schema = None  # unknown on the driver: the writer refuses its first batch
    with pytest.raises(SinkOutputError, match="column 'p' is not in the table"):
        job.write(1, [1])
    assert len(data_files(uri)) == 1  # nothing written


def test_mode_error_refuses_a_table_with_data_and_append_adds(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    write_deltalake(str(uri), pa.Table.from_batches([batch([100])]))
    job = Job(tmp_path, DeltaSink(str(uri)))
    with pytest.raises(SinkOutputError, match=r"already holds data \(version 0, 1 files\)"):
        job.sink.prepare_output(job.context(1))
    job = Job(tmp_path, DeltaSink(str(uri), mode="append"))
    job.sink.prepare_output(job.context(1))
    job.commit(1, job.write(1, [1]))
    assert ids_in(uri) == [1, 100]


def test_overwrite_replaces_the_rows_at_the_runs_first_commit(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    write_deltalake(str(uri), pa.Table.from_batches([batch([100, 101])]))
    job = Job(tmp_path, DeltaSink(str(uri), mode="overwrite"))
    job.sink.prepare_output(job.context(5))
    first = job.write(5, [1, 2])
    assert ids_in(uri) == [100, 101]  # until the run's first commit
    job.commit(5, first)
    assert ids_in(uri) == [1, 2]
    job.commit(5, first)  # again after a crash: still replaced once
    job.commit(6, job.write(6, [3]))  # later commits of the run append
    job.commit(7, job.write(7, [4], run="run2"), run="run2")  # and so does a resumed run
    assert ids_in(uri) == [1, 2, 3, 4]
    assert DeltaTable(str(uri)).version() == 3


def test_partition_by_writes_one_folder_per_value(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    job = Job(tmp_path, DeltaSink(str(uri), partition_by=["p"]))
    job.commit(1, job.write(1, [1, 2, 3, 4, 5]))
    table = DeltaTable(str(uri))
    assert table.metadata().partition_columns == ["p"]
    assert {f.split("/")[0] for f in data_files(uri)} == {"p=p0", "p=p1"}
    rows = read_delta(uri).to_pylist()
    assert rows[0] == {"id": 1, "p": "p1", "name": "n1"}
    actions = pa.table(table.get_add_actions(flatten=True)).sort_by("partition.p").to_pylist()
    assert [(a["num_records"], a["min.id"], a["max.id"]) for a in actions] == [(2, 2, 4), (3, 1, 5)]
    assert actions[0]["null_count.name"] == 0
    job.commit(2, job.write(2, [6], run="run2"))
    odd = pa.record_batch({"id": [7], "p": ["a b/c%"], "name": ["n7"]}, schema=SCHEMA)
    task = TaskInfo("sink", "one-input", run_id="run2", job_id=job.job_id)
    transaction = job.sink.begin_transaction(SinkWriterContext(task, job.storage, "out"), 3)
    job.sink.write(transaction, odd)
    job.commit(3, job.sink.pre_commit(transaction), run="run2")
    read = read_delta(uri).to_pylist()
    assert read[-1] == {"id": 7, "p": "a b/c%", "name": "n7"}  # the folder is escaped
    with pytest.raises(SinkOutputError, match=r"partitioned by \['p'\], the sink by \['name'\]"):
        DeltaSink(str(uri), mode="append", partition_by=["name"]).prepare_output(job.context(2))


def test_a_truncated_data_file_is_not_published(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    job = Job(tmp_path, DeltaSink(str(uri)))
    committables = job.write(1, [1, 2, 3])
    staged = uri / committables[0]["path"]
    staged.write_bytes(staged.read_bytes()[:-20])
    with pytest.raises(CommittableError, match="truncated or changed") as refused:
        job.commit(1, committables)
    assert "new_run=True" in str(refused.value)
    assert not (uri / "_delta_log").exists()


def test_an_empty_stream_of_a_known_schema_creates_the_table(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "t"))
    sink.input_schema = SCHEMA
    Job(tmp_path, sink).commit(1, [])
    table = DeltaTable(str(tmp_path / "t"))
    assert pa.schema(table.schema().to_arrow()).names == ["id", "p", "name"]
    assert read_delta(tmp_path / "t").num_rows == 0


def test_columns_are_stored_as_delta_types_and_read_back_by_deltalake(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    stream = pa.record_batch(
        {
            "at": pa.array([1_000_001, 2_000_000], pa.timestamp("ns")),  # Delta keeps micros
            "small": pa.array([1, 2], pa.uint8()),
            "ratio": [0.5, float("nan")],
            "tags": [["a"], []],
        }
    )
    job = Job(tmp_path, DeltaSink(str(uri)))
    task = TaskInfo("sink", "one-input", run_id="run1", job_id=job.job_id)
    transaction = job.sink.begin_transaction(SinkWriterContext(task, job.storage, "out"), 1)
    job.sink.write(transaction, stream)
    [file] = job.sink.pre_commit(transaction)
    assert "ratio" not in file["stats"]["maxValues"]  # Parquet's float max ignores NaN
    job.commit(1, [file])
    read = read_delta(uri)
    assert read.schema.field("at").type == pa.timestamp("us")
    assert read.column("at").cast(pa.int64()).to_pylist() == [1000, 2000]
    assert read.column("small").to_pylist() == [1, 2]
    assert read.column("tags").to_pylist() == [["a"], []]


def test_a_folder_of_other_files_is_not_made_a_table(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    uri.mkdir()
    (uri / "data.csv").write_text("id\n1\n")
    job = Job(tmp_path, DeltaSink(str(uri), mode="append"))
    with pytest.raises(SinkOutputError, match=r"is not a Delta table but holds files \(e.g. data"):
        job.sink.prepare_output(job.context(1))
    (uri / "data.csv").unlink()
    job.write(1, [1])  # a dead run's file of the sink's own does not count
    job.sink.prepare_output(job.context(1))


def test_a_sink_on_s3_reaches_the_table_with_its_storage_options(
    tmp_path: Path, s3: S3Server, s3_folder: str
) -> None:
    """On a real S3 server (moto): the table's absence is known at once, and the writers'
    files and the committer's log both reach the endpoint of ``storage_options`` (delta-rs
    commits each log entry by a conditional put, If-None-Match)."""
    uri = f"s3://{BUCKET}/{s3_folder}/t"
    options = s3.delta_options(aws_conditional_put="etag")
    job = Job(tmp_path, DeltaSink(uri, storage_options=options))
    assert job.sink.table() is None  # no table yet: answered, not retried for minutes
    job.sink.prepare_output(job.context(1))
    job.commit(1, job.write(1, [1, 2], subtask=0) + job.write(1, [3], subtask=1))
    job.commit(2, job.write(2, [4]))
    table = DeltaTable(uri, storage_options=options)
    assert (table.version(), table.transaction_version("flintlock-job1-out")) == (1, 2)
    # deltalake's dataset (its SQL engine holds the GIL while it waits for the server)
    assert sorted(table.to_pyarrow_dataset().to_table()["id"].to_pylist()) == [1, 2, 3, 4]
    filesystem, root = job.sink.filesystem()
    assert root == f"{BUCKET}/{s3_folder}/t"
    names = [i.base_name for i in filesystem.get_file_info(pafs.FileSelector(root))]
    assert sum(name.endswith(".parquet") for name in names) == 3
