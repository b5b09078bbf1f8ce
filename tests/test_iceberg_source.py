"""The iceberg source without Spark: splits planned on the driver from a real pyiceberg
SQL catalog on a SQLite file, read by the readers tasks would run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import GraphError, PluginError
from flintlock.plugins.iceberg_source import IcebergSource, IcebergStreamSource, iceberg_source
from flintlock.sinks.iceberg_tables import catalog_spec, load_catalog

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(first: int, count: int) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def make_table(warehouse: Path) -> Any:
    catalog = load_catalog(catalog_spec(None, str(warehouse), "test"), "test")
    catalog.create_namespace("db")
    return catalog.create_table("db.t", schema=SCHEMA)


def read_all(source: Any, assignments: list[list[Any]] | None = None) -> list[int]:
    """Every id the source's subtasks read (epoch readers when given assignments)."""
    ids: list[int] = []
    for subtask in range(2):
        if assignments is None:
            reader = source.create_reader(subtask, 2, {})
        else:
            reader = source.create_epoch_reader(subtask, 2, assignments[subtask])
        for batch in reader.read():
            assert batch.schema == source.schema
            ids += batch.column("id").to_pylist()
    return sorted(ids)


def test_a_bounded_read_is_one_snapshot(tmp_path: Path) -> None:
    table = make_table(tmp_path)
    table.append(rows(0, 3))
    table.append(rows(3, 3))
    first = table.snapshots()[0].snapshot_id
    table.append(rows(6, 3))
    source = iceberg_source("db.t", warehouse=str(tmp_path))
    assert isinstance(source, IcebergSource) and source.bounded
    assert source.schema == SCHEMA
    assert read_all(source) == list(range(9))
    assert read_all(IcebergSource("db.t", warehouse=str(tmp_path), snapshot_id=first)) == [0, 1, 2]


def test_a_bounded_reader_resumes_at_its_positions(tmp_path: Path) -> None:
    make_table(tmp_path).append(rows(0, 10))
    source = IcebergSource("db.t", warehouse=str(tmp_path), batch_size=4)
    reader = source.create_reader(0, 1, {})
    batches = reader.read()
    assert next(batches).column("id").to_pylist() == [0, 1, 2, 3]
    restored = source.create_reader(0, 1, reader.positions())
    assert [b.column("id").to_pylist() for b in restored.read()] == [[4, 5, 6, 7], [8, 9]]


def test_an_unbounded_read_takes_each_append_once_from_its_offset(tmp_path: Path) -> None:
    table = make_table(tmp_path)
    source = iceberg_source("db.t", warehouse=str(tmp_path), unbounded=True)
    assert isinstance(source, IcebergStreamSource) and not source.bounded
    state = source.initial_state(0)
    plan = source.plan_epoch(state, 0, 2)  # an empty table: nothing yet
    assert read_all(source, plan.assignments) == []
    table.append(rows(0, 3))
    table.append(rows(3, 2))
    plan = source.plan_epoch(plan.state, 0, 2)
    assert read_all(source, plan.assignments) == [0, 1, 2, 3, 4]
    offset = plan.state
    table.append(rows(5, 2))
    assert read_all(source, source.plan_epoch(offset, 0, 2).assignments) == [5, 6]
    # a restore from the checkpoint holding ``offset`` plans the very same epoch again
    again = IcebergStreamSource("db.t", warehouse=str(tmp_path))
    assert read_all(again, again.plan_epoch(offset, 0, 2).assignments) == [5, 6]
    assert source.plan_epoch(source.plan_epoch(offset, 0, 2).state, 0, 2).assignments == [[], []]


def test_an_unbounded_read_refuses_rows_taken_back(tmp_path: Path) -> None:
    table = make_table(tmp_path)
    table.append(rows(0, 3))
    source = IcebergStreamSource("db.t", warehouse=str(tmp_path))
    plan = source.plan_epoch(source.initial_state(0), 0, 1)
    table.overwrite(rows(10, 1))
    with pytest.raises(PluginError, match="cannot take rows back"):
        source.plan_epoch(plan.state, 0, 1)


def test_a_missing_table_or_snapshot_is_refused_when_the_job_is_built(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match=r"cannot read Iceberg table 'db\.nope'"):
        IcebergSource("db.nope", warehouse=str(tmp_path))
    make_table(tmp_path)
    with pytest.raises(GraphError, match="has no snapshot 42"):
        IcebergSource("db.t", warehouse=str(tmp_path), snapshot_id=42)
