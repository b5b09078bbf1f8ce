"""Every built-in 2PC sink says its transaction and committable types
(``TwoPhaseCommitSink[TxnT, CommT]``), and what its writer pre-commits is that committable:
JSON (a TypedDict's keys, values of their types), recorded in checkpoint metadata as it is."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import TwoPhaseCommitSink
from flintlock.plugin_api import CheckpointStorage, CommitContext, SinkWriterContext, TaskInfo
from flintlock.sinks.collect import CollectSink, StagedArrowFile
from flintlock.sinks.delta import DeltaSink
from flintlock.sinks.delta_files import DeltaDataFile
from flintlock.sinks.files import FileSink, StagedParquetFile
from flintlock.sinks.iceberg import IcebergSink
from flintlock.sinks.iceberg_stats import IcebergDataFile
from flintlock.sinks.postgres import PostgresSink
from flintlock.sinks.postgres_sql import StagedTransaction

SINKS: dict[type, type] = {
    FileSink: StagedParquetFile,
    CollectSink: StagedArrowFile,
    DeltaSink: DeltaDataFile,
    IcebergSink: IcebergDataFile,
    PostgresSink: StagedTransaction,
}
"""Each built-in 2PC sink and its committable type."""

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
    assert committable is SINKS[sink] and typing.is_typeddict(committable)
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
    committable = SINKS[kind]
    hints = typing.get_type_hints(committable)
    required, optional = committable.__required_keys__, committable.__optional_keys__
    for item in pre_committed(makers(tmp_path)[kind], tmp_path):
        assert required <= item.keys() <= required | optional
        for key, value in item.items():
            assert isinstance(value, typing.get_origin(hints[key]) or hints[key]), key


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
