"""Every built-in 2PC sink says its transaction and committable types
(``TwoPhaseCommitSink[TxnT, CommT]``), and what its writer pre-commits is that committable:
JSON (a TypedDict's keys, values of their types, or one of a union of TypedDicts'),
recorded in checkpoint metadata as it is."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from s3_server import S3Server

from flintlock import TwoPhaseCommitSink
from flintlock.plugin_api import CheckpointStorage, CommitContext, SinkWriterContext, TaskInfo
from flintlock.sinks.collect import CollectSink, StagedArrowFile
from flintlock.sinks.delta import DeltaSink
from flintlock.sinks.delta_files import DeltaDataFile
from flintlock.sinks.files import FileSink, StagedParquetFile
from flintlock.sinks.files_s3 import UploadedParquetFile
from flintlock.sinks.iceberg import IcebergSink
from flintlock.sinks.iceberg_stats import IcebergDataFile
from flintlock.sinks.postgres import PostgresSink
from flintlock.sinks.postgres_sql import StagedTransaction

SINKS: dict[type, type] = {
    FileSink: StagedParquetFile | UploadedParquetFile,  # staged, or on S3 uploaded
    CollectSink: StagedArrowFile,
    DeltaSink: DeltaDataFile,
    IcebergSink: IcebergDataFile,
    PostgresSink: StagedTransaction,
}
"""Each built-in 2PC sink and its committable type."""


def kinds(committable: Any) -> tuple[Any, ...]:
    """The TypedDicts a committable type is: itself, or the members of its union."""
    return typing.get_args(committable) or (committable,)


def is_one_of(item: dict[str, Any], committable: Any) -> bool:
    """``item`` has the keys (and value types) of one of the committable's TypedDicts."""
    for kind in kinds(committable):
        hints = typing.get_type_hints(kind)
        required, optional = kind.__required_keys__, kind.__optional_keys__
        if required <= item.keys() <= required | optional and all(
            isinstance(value, typing.get_origin(hints[key]) or hints[key])
            for key, value in item.items()
        ):
            return True
    return False


SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def declared(sink: type) -> tuple[Any, ...]:
    """The (transaction, committable) types ``sink`` gives TwoPhaseCommitSink."""
    for base in getattr(sink, "__orig_bases__", ()):
        if typing.get_origin(base) is TwoPhaseCommitSink:
            return typing.get_args(base)
    raise AssertionError(f"{sink.__name__} does not say its transaction and committable types")


@pytest.mark.parametrize("sink", list(SINKS), ids=lambda s: s.__name__)
def test_a_built_in_sink_names_its_transaction_and_committable_types(sink: type) -> None:
    transaction, committable = declared(sink)
    assert committable == SINKS[sink]
    assert all(typing.is_typeddict(kind) for kind in kinds(committable))
    assert typing.get_type_hints(sink.begin_transaction)["return"] is transaction
    assert typing.get_type_hints(sink.pre_commit)["return"] == list[committable]
    assert typing.get_type_hints(sink.commit)["committables"] == list[committable]
    assert typing.get_type_hints(sink.abort_uncommitted)["keep"] == list[committable]


def pre_committed(sink: TwoPhaseCommitSink[Any, Any], tmp_path: Path) -> list[Any]:
    """One subtask's transaction of three rows, pre-committed, through JSON (as the
    acknowledgement and the checkpoint metadata carry it)."""
    storage = CheckpointStorage.from_uri(str(tmp_path / "chk"))
    context = CommitContext("job", "run1", 1, storage, "job1", "out")
    sink.input_schema = SCHEMA
    sink.prepare_output(context)
    task = TaskInfo("sink", "one-input", 0, 1, attempt_id=7, run_id="run1", job_id="job1")
    transaction = sink.begin_transaction(SinkWriterContext(task, storage, "out"), 1)
    sink.write(transaction, pa.record_batch([[1, 2, 3], ["a", "b", "c"]], schema=SCHEMA))
    sink.finish(transaction)
    committables = sink.pre_commit(transaction)
    assert committables and json.loads(json.dumps(committables)) == committables
    return committables


def makers(tmp_path: Path) -> dict[type, TwoPhaseCommitSink[Any, Any]]:
    return {
        FileSink: FileSink(str(tmp_path / "files")),
        CollectSink: CollectSink("rows"),
        DeltaSink: DeltaSink(str(tmp_path / "delta")),
        IcebergSink: IcebergSink("db.t", warehouse=str(tmp_path / "warehouse"), schema=SCHEMA),
    }


@pytest.mark.parametrize("kind", [FileSink, CollectSink, DeltaSink, IcebergSink])
def test_what_a_sink_pre_commits_is_its_committable_type(kind: type, tmp_path: Path) -> None:
    for item in pre_committed(makers(tmp_path)[kind], tmp_path):
        assert is_one_of(item, SINKS[kind]), item


def test_what_a_file_sink_on_s3_pre_commits_is_an_uploaded_parquet_file(
    s3: S3Server, s3_folder: str, tmp_path: Path
) -> None:
    [item] = pre_committed(FileSink(s3.uri(f"{s3_folder}/files")), tmp_path)
    assert is_one_of(item, UploadedParquetFile) and item["rows"] == 3


@pytest.mark.parametrize("visibility", ["checkpoint", "subtask"])
def test_what_a_postgres_sink_pre_commits_is_its_committable_type(
    visibility: str, pg_conninfo: str, tmp_path: Path
) -> None:
    """Staged rows, or (``visibility="subtask"``) a prepared transaction, on a real
    PostgreSQL: the committable is JSON of StagedTransaction's keys and types."""
    sink = PostgresSink(pg_conninfo, f"public.committables_{visibility}", visibility=visibility)
    hints = typing.get_type_hints(StagedTransaction)
    (item,) = pre_committed(sink, tmp_path)
    assert {"gid", "subtask", "attempt", "rows"} <= item.keys() <= hints.keys()
    assert all(isinstance(value, hints[key]) for key, value in item.items())
    assert item["rows"] == 3 and item.get("prepared", False) is (visibility == "subtask")
    sink.abort_uncommitted(
        CommitContext(
            "job", "run2", 0, CheckpointStorage.from_uri(str(tmp_path / "chk")), "job1", "out"
        ),
        [],
    )  # nothing of it stays on the server
