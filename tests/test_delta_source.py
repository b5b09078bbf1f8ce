"""The delta source without Spark: its readers and its epoch planning on real tables
written by deltalake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from delta_tables import read_delta
from deltalake import DeltaTable, write_deltalake
from s3_server import BUCKET, S3Server

from flintlock import PluginError, Source, StreamExecutionEnvironment
from flintlock.plugins.delta_source import DeltaSource, DeltaStreamSource


def rows(ids: list[int]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([f"2024-01-0{1 + i % 3}" for i in ids]).cast(pa.date32()),
            "name": [f"n{i}" for i in ids],
        }
    )


def read_all(source: Source, parallelism: int) -> list[dict[str, Any]]:
    read = []
    for subtask in range(parallelism):
        for batch in source.create_reader(subtask, parallelism, {}).read():
            read += batch.to_pylist()
    return sorted(read, key=lambda row: row["id"])


def read_epoch(source: DeltaStreamSource, assignments: list[list[Any]]) -> list[int]:
    ids = []
    for subtask, splits in enumerate(assignments):
        for batch in source.create_epoch_reader(subtask, len(assignments), splits).read():
            ids += batch.column("id").to_pylist()
    return sorted(ids)


def test_a_bounded_read_is_one_version_split_by_file(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, rows([1, 2, 3, 4]), partition_by=["day"])
    write_deltalake(uri, rows([5, 6]), partition_by=["day"], mode="append")
    source = DeltaSource(uri)
    write_deltalake(uri, rows([7]), partition_by=["day"], mode="append")  # after the build
    expected = read_delta(uri, version=1).to_pylist()
    assert read_all(source, 3) == expected  # the partition column (a date) restored
    assert source.schema == pa.schema(DeltaTable(uri).schema().to_arrow())
    assert [r["id"] for r in read_all(DeltaSource(uri, version=0), 2)] == [1, 2, 3, 4]


def test_a_restored_reader_skips_what_was_read(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, rows(list(range(10))))
    source = DeltaSource(uri, batch_size=4)
    reader = source.create_reader(0, 1, {})
    batches = reader.read()
    first = next(batches)
    restored = source.create_reader(0, 1, reader.positions())
    rest = [i for b in restored.read() for i in b.column("id").to_pylist()]
    assert first.column("id").to_pylist() + rest == list(range(10))


def test_unbounded_epochs_read_what_each_version_appended_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, rows([1, 2]), partition_by=["day"])
    source = DeltaStreamSource(uri)
    state = source.initial_state(now_ms=0)
    first = source.plan_epoch(state, 0, 2)
    assert read_epoch(source, first.assignments) == [1, 2]
    write_deltalake(uri, rows([3, 4, 5]), partition_by=["day"], mode="append")
    write_deltalake(uri, rows([6]), partition_by=["day"], mode="append")
    second = source.plan_epoch(first.state, 0, 2)
    assert second.state["version"] == 2
    assert read_epoch(source, second.assignments) == [3, 4, 5, 6]
    assert source.plan_epoch(first.state, 0, 2) == second  # planned again: the same
    idle = source.plan_epoch(second.state, 0, 2)
    assert read_epoch(source, idle.assignments) == [] and idle.state == second.state


def test_an_unbounded_read_of_a_table_that_lost_files_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, rows([1, 2]))
    source = DeltaStreamSource(uri)
    state = source.plan_epoch(source.initial_state(0), 0, 1).state
    write_deltalake(uri, rows([3]), mode="overwrite")
    with pytest.raises(PluginError, match="only appended to: between versions 0 and 1, 1 files"):
        source.plan_epoch(state, 0, 1)


def test_from_delta_builds_the_registered_source(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, rows([1]))
    env = StreamExecutionEnvironment()
    assert env.from_delta(uri).schema == pa.schema(DeltaTable(uri).schema().to_arrow())
    with pytest.raises(PluginError, match="there is no Delta table at"):
        env.from_delta(str(tmp_path / "nothing"))


def test_a_table_on_s3_is_read_with_its_storage_options(s3: S3Server, s3_folder: str) -> None:
    """On a real S3 server (moto), the table is found and its files are read at the
    endpoint of ``storage_options`` (not pyarrow's default, AWS)."""
    uri = f"s3://{BUCKET}/{s3_folder}/t"
    options = s3.delta_options()
    write_deltalake(uri, rows([1, 2, 3]), partition_by=["day"], storage_options=options)
    source = DeltaSource(uri, storage_options=options)
    assert [row["id"] for row in read_all(source, 2)] == [1, 2, 3]
    with pytest.raises(PluginError, match="there is no Delta table at"):
        DeltaSource(f"s3://{BUCKET}/{s3_folder}/nothing", storage_options=options)
