"""IcebergSink without Spark: writers and committer driven call by call against a real
pyiceberg SQL catalog on a SQLite file, read back with pyiceberg's own scan."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import CommittableError, SinkOutputError
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.plugin_api import CommitContext, SinkWriterContext, TaskInfo
from flintlock.sinks.iceberg import IcebergSink
from flintlock.sinks.iceberg_tables import CHECKPOINT_ID, JOB_ID, catalog_spec, load_catalog

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("name", pa.string())])


def rows(first: int, count: int) -> pa.RecordBatch:
    ids = list(range(first, first + count))
    return pa.record_batch(
        [pa.array(ids, pa.int64()), pa.array([i % 3 for i in ids]), [f"n{i}" for i in ids]],
        schema=SCHEMA,
    )


class Driver:
    """Plays flintlock's driver and tasks for one sink of one job."""

    def __init__(self, base: Path, job_id: str = "job1", run_id: str = "runA") -> None:
        self.storage = CheckpointStorage.from_uri(str(base / "chk"))
        self.job_id = job_id
        self.run_id = run_id

    def context(self, checkpoint_id: int) -> CommitContext:
        return CommitContext("job", self.run_id, checkpoint_id, self.storage, self.job_id, "out")

    def write(
        self, sink: IcebergSink, checkpoint_id: int, batches: list[pa.RecordBatch], attempt: int = 7
    ) -> list[Any]:
        """One subtask's transaction of checkpoint ``checkpoint_id``: its committables."""
        task = TaskInfo(
            "sink", "one-input", 0, 1, attempt_id=attempt, run_id=self.run_id, job_id=self.job_id
        )
        transaction = sink.begin_transaction(
            SinkWriterContext(task, self.storage, "out"), checkpoint_id
        )
        for batch in batches:
            sink.write(transaction, batch)
        return sink.pre_commit(transaction)


def table_rows(warehouse: Path, name: str = "db.t") -> list[dict[str, Any]]:
    catalog = load_catalog(catalog_spec(None, str(warehouse), "test"), "test")
    return sorted(catalog.load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def data_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet"))


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


def test_a_commit_repeated_after_a_driver_crash_adds_the_rows_once(
    tmp_path: Path, warehouse: Path
) -> None:
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    sink.prepare_output(driver.context(1))
    committables = driver.write(sink, 1, [rows(0, 5), rows(5, 5)])
    assert [f["rows"] for f in committables] == [10]
    sink.commit(driver.context(1), committables)
    # the driver dies before flintlock records the commit: a new driver commits again
    again = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA, mode="append")
    again.abort_uncommitted(driver.context(1), committables)
    again.commit(driver.context(1), committables)
    assert [r["id"] for r in table_rows(warehouse)] == list(range(10))
    table = load_catalog(catalog_spec(None, str(warehouse), "t"), "t").load_table("db.t")
    summary = table.current_snapshot().summary
    assert (summary[JOB_ID], summary[CHECKPOINT_ID]) == ("job1/out", "1")
    assert len(table.snapshots()) == 1


def test_checkpoints_commit_in_order_and_an_older_one_is_skipped(
    tmp_path: Path, warehouse: Path
) -> None:
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    sink.prepare_output(driver.context(1))
    first = driver.write(sink, 1, [rows(0, 3)])
    second = driver.write(sink, 2, [rows(3, 3)])
    sink.commit(driver.context(1), first)
    sink.commit(driver.context(2), second)
    sink.commit(driver.context(1), first)  # recorded as older than the table's newest
    assert [r["id"] for r in table_rows(warehouse)] == list(range(6))


def test_two_jobs_committing_in_turn_each_add_their_rows_once(
    tmp_path: Path, warehouse: Path
) -> None:
    """A sink keeps the table its last commit left; the other job's commit in between
    makes it stale, which the catalog's compare-and-swap catches: reloaded, retried."""
    first, second = Driver(tmp_path, "job1"), Driver(tmp_path, "job2")
    ours = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    theirs = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA, mode="append")
    ours.prepare_output(first.context(1))
    theirs.prepare_output(second.context(1))
    for checkpoint in (1, 2, 3):
        for driver, sink, base in ((first, ours, 0), (second, theirs, 1000)):
            start = base + 10 * checkpoint
            sink.commit(
                driver.context(checkpoint), driver.write(sink, checkpoint, [rows(start, 4)])
            )
            sink.abort_uncommitted(driver.context(checkpoint), [])
    expected = [b + 10 * c + i for b in (0, 1000) for c in (1, 2, 3) for i in range(4)]
    assert [r["id"] for r in table_rows(warehouse)] == sorted(expected)
    table = load_catalog(catalog_spec(None, str(warehouse), "t"), "t").load_table("db.t")
    assert len(table.snapshots()) == 6


def test_files_of_failed_attempts_and_uncommitted_checkpoints_are_removed(
    tmp_path: Path, warehouse: Path
) -> None:
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    sink.prepare_output(driver.context(1))
    driver.write(sink, 1, [rows(0, 4)], attempt=1)  # a failed attempt's file stays behind
    committed = driver.write(sink, 1, [rows(0, 4)], attempt=2)
    lost = driver.write(sink, 2, [rows(4, 4)])  # the checkpoint never completed
    pending = driver.write(sink, 3, [rows(8, 4)])  # completed, commit pending
    folder = warehouse / "db" / "t" / "data"
    assert len(data_files(folder)) == 4
    sink.commit(driver.context(1), committed)
    sink.abort_uncommitted(driver.context(0), pending)
    assert data_files(folder) == [
        "flintlock-job1-out/chk-1/runA-0-2-0.parquet",
        "flintlock-job1-out/chk-3/runA-0-7-0.parquet",
    ]
    assert not os.path.exists(lost[0]["path"].removeprefix("file://"))
    sink.commit(driver.context(3), pending)
    assert [r["id"] for r in table_rows(warehouse)] == [0, 1, 2, 3, 8, 9, 10, 11]


def test_another_jobs_files_are_never_removed(tmp_path: Path, warehouse: Path) -> None:
    one, two = Driver(tmp_path, "job1"), Driver(tmp_path, "job2")
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA, mode="append")
    sink.prepare_output(one.context(1))
    others = two.write(sink, 5, [rows(0, 2)])
    sink.abort_uncommitted(one.context(0), [])
    assert os.path.exists(others[0]["path"].removeprefix("file://"))


def test_a_stream_that_does_not_fit_the_table_is_refused_naming_the_columns(
    tmp_path: Path, warehouse: Path
) -> None:
    driver = Driver(tmp_path)
    IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA).prepare_output(driver.context(1))
    wrong = pa.schema([("id", pa.string()), ("k", pa.int64()), ("extra", pa.int64())])
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=wrong, mode="append")
    with pytest.raises(SinkOutputError) as refused:
        sink.prepare_output(driver.context(1))
    assert "column 'id' is string, the table's is long" in str(refused.value)
    assert "column 'extra' is not in the table" in str(refused.value)
    # without a declared schema the writer refuses the first batch, before writing a file
    writer = IcebergSink("db.t", warehouse=str(warehouse), mode="append")
    writer.prepare_output(driver.context(1))
    batch = pa.record_batch([pa.array([1]), pa.array([2])], names=["id", "extra"])
    with pytest.raises(SinkOutputError, match="column 'extra' is not in the table"):
        driver.write(writer, 1, [batch])
    assert data_files(warehouse) == []


def test_promotable_and_missing_optional_columns_fit(tmp_path: Path, warehouse: Path) -> None:
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    sink.prepare_output(driver.context(1))
    narrow = pa.record_batch([pa.array([1, 2], pa.int32())], names=["id"])
    large = pa.record_batch([pa.array([3]), pa.array(["c"], pa.large_string())], ["id", "name"])
    sink.commit(driver.context(1), driver.write(sink, 1, [narrow, large]))
    assert table_rows(warehouse) == [
        {"id": 1, "k": None, "name": None},
        {"id": 2, "k": None, "name": None},
        {"id": 3, "k": None, "name": "c"},
    ]


def test_a_null_in_a_required_column_is_refused(tmp_path: Path, warehouse: Path) -> None:
    driver = Driver(tmp_path)
    required = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=required)
    sink.prepare_output(driver.context(1))
    with pytest.raises(SinkOutputError, match="column 'id' is required and holds nulls"):
        driver.write(sink, 1, [pa.record_batch([pa.array([1, None])], names=["id"])])


def test_mode_error_refuses_a_table_with_rows_and_a_missing_table_needs_a_schema(
    tmp_path: Path, warehouse: Path
) -> None:
    driver = Driver(tmp_path)
    with pytest.raises(SinkOutputError, match="pass schema="):
        IcebergSink("db.t", warehouse=str(warehouse)).prepare_output(driver.context(1))
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    sink.prepare_output(driver.context(1))
    sink.commit(driver.context(1), driver.write(sink, 1, [rows(0, 2)]))
    with pytest.raises(SinkOutputError, match=r"already holds 2 rows.*mode=.append."):
        IcebergSink("db.t", warehouse=str(warehouse)).prepare_output(Driver(tmp_path).context(2))


def test_overwrite_replaces_the_rows_in_the_runs_first_commit_only(
    tmp_path: Path, warehouse: Path
) -> None:
    first = Driver(tmp_path, run_id="runA")
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    sink.prepare_output(first.context(1))
    sink.commit(first.context(1), first.write(sink, 1, [rows(0, 5)]))
    second = Driver(tmp_path, run_id="runB")
    overwrite = IcebergSink("db.t", warehouse=str(warehouse), mode="overwrite")
    overwrite.prepare_output(second.context(2))
    replacing = second.write(overwrite, 2, [rows(100, 2)])
    overwrite.commit(second.context(2), replacing)
    overwrite.commit(second.context(2), replacing)  # repeated: still replaced once
    # a driver restart continues the run under a new run id: later commits append
    third = Driver(tmp_path, run_id="runC")
    overwrite.commit(third.context(3), third.write(overwrite, 3, [rows(200, 1)]))
    assert [r["id"] for r in table_rows(warehouse)] == [100, 101, 200]


@pytest.mark.filterwarnings("error")
def test_overwrite_of_a_new_table_starting_with_an_empty_checkpoint(
    tmp_path: Path, warehouse: Path
) -> None:
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA, mode="overwrite")
    sink.prepare_output(driver.context(1))
    sink.commit(driver.context(1), [])  # nothing to replace, nothing to add
    sink.commit(driver.context(2), driver.write(sink, 2, [rows(0, 3)]))
    sink.commit(driver.context(3), driver.write(sink, 3, [rows(3, 1)]))
    assert [r["id"] for r in table_rows(warehouse)] == [0, 1, 2, 3]


def test_partitioned_tables_get_one_file_per_partition_value(
    tmp_path: Path, warehouse: Path
) -> None:
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA, partition_by=["k"])
    sink.prepare_output(driver.context(1))
    committables = driver.write(sink, 1, [rows(0, 6), rows(6, 3)])
    assert sorted(f["rows"] for f in committables) == [3, 3, 3]
    sink.commit(driver.context(1), committables)
    catalog = load_catalog(catalog_spec(None, str(warehouse), "t"), "t")
    files = catalog.load_table("db.t").inspect.files().to_pylist()
    assert sorted(f["partition"]["k"] for f in files) == [0, 1, 2]
    assert [r["id"] for r in table_rows(warehouse)] == list(range(9))


def test_a_damaged_data_file_is_refused_not_published(tmp_path: Path, warehouse: Path) -> None:
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    sink.prepare_output(driver.context(1))
    committables = driver.write(sink, 1, [rows(0, 3)])
    with open(committables[0]["path"].removeprefix("file://"), "ab") as file:
        file.write(b"junk")
    with pytest.raises(CommittableError, match=r"bytes.*truncated or changed"):
        sink.commit(driver.context(1), committables)
    assert table_rows(warehouse) == []


def test_mistakes_visible_when_the_sink_is_built_are_refused() -> None:
    with pytest.raises(SinkOutputError, match=r"'namespace\.name'"):
        IcebergSink("t", warehouse="/tmp/w")
    with pytest.raises(SinkOutputError, match=r"needs catalog= .* or warehouse="):
        IcebergSink("db.t")
    with pytest.raises(SinkOutputError, match="mode 'upsert'"):
        IcebergSink("db.t", warehouse="/tmp/w", mode="upsert")


def test_partitioning_flintlock_cannot_compute_is_refused_before_writing(
    tmp_path: Path, warehouse: Path
) -> None:
    from pyiceberg.transforms import DayTransform

    catalog = load_catalog(catalog_spec(None, str(warehouse), "t"), "t")
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=pa.schema([("ts", pa.timestamp("us"))]))
    with table.update_spec() as update:
        update.add_field("ts", DayTransform(), "ts_day")
    sink = IcebergSink("db.t", warehouse=str(warehouse), mode="append")
    try:
        import pyiceberg_core  # noqa: F401
    except ImportError:
        with pytest.raises(SinkOutputError, match=r"partitioned by ts_day = day\(ts\)"):
            sink.prepare_output(Driver(tmp_path).context(1))
    else:  # with pyiceberg-core the transform is computed: the sink writes day partitions
        sink.prepare_output(Driver(tmp_path).context(1))


FILE_FIELDS = (
    "partition",
    "record_count",
    "file_size_in_bytes",
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
    "split_offsets",
)


def _files_by_name(table: Any) -> dict[str, dict[str, Any]]:
    files = table.inspect.files().to_pylist()
    return {f["file_path"].rsplit("/", 1)[1]: {k: f[k] for k in FILE_FIELDS} for f in files}


@pytest.mark.parametrize("partition_by", [[], ["k"]])
def test_data_files_carry_the_statistics_pyiceberg_reads_from_their_footers(
    tmp_path: Path, warehouse: Path, partition_by: list[str]
) -> None:
    """The committer builds each DataFile from the statistics its writer computed (no
    footer read per commit); the table records what pyiceberg's add_files records for a
    copy of the same files, read from their footers."""
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA, partition_by=partition_by)
    sink.prepare_output(driver.context(1))
    committables = driver.write(sink, 1, [rows(0, 50), rows(50, 25)])
    assert all("stats" in f for f in committables)
    sink.commit(driver.context(1), committables)
    catalog = load_catalog(catalog_spec(None, str(warehouse), "t"), "t")
    ours = catalog.load_table("db.t")
    reference = catalog.create_table("db.reference", ours.schema(), partition_spec=ours.spec())
    copies = []
    for file in committables:
        source = Path(file["path"].removeprefix("file://"))
        copy = Path(reference.location().removeprefix("file://")) / "data" / source.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(source.read_bytes())
        copies.append(f"file://{copy}")
    reference.add_files(copies)
    assert _files_by_name(ours) == _files_by_name(catalog.load_table("db.reference"))
    assert len(_files_by_name(ours)) == (3 if partition_by else 1)
    assert [r["id"] for r in table_rows(warehouse)] == list(range(75))


def test_a_file_without_statistics_or_of_an_older_spec_is_read_from_its_footer(
    tmp_path: Path, warehouse: Path
) -> None:
    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA)
    sink.prepare_output(driver.context(1))
    first = driver.write(sink, 1, [rows(0, 10)])
    del first[0]["stats"]  # e.g. a partition value JSON cannot carry
    sink.commit(driver.context(1), first)
    second = driver.write(sink, 2, [rows(10, 10)])
    second[0]["stats"]["spec_id"] += 1  # written for a spec the table no longer has
    second[0]["stats"]["record_count"] = 999  # would be recorded if trusted
    sink.commit(driver.context(2), second)
    catalog = load_catalog(catalog_spec(None, str(warehouse), "t"), "t")
    files = catalog.load_table("db.t").inspect.files().to_pylist()
    assert sorted(f["record_count"] for f in files) == [10, 10]
    assert [r["id"] for r in table_rows(warehouse)] == list(range(20))


def test_the_embedded_catalog_is_named_flintlock_unless_named_otherwise(
    tmp_path: Path, warehouse: Path
) -> None:
    from pyiceberg.catalog import load_catalog as pyiceberg_catalog
    from pyiceberg.exceptions import NoSuchTableError

    driver = Driver(tmp_path)
    sink = IcebergSink("db.t", warehouse=str(warehouse), schema=SCHEMA, catalog_name="shop")
    sink.prepare_output(driver.context(1))
    sink.commit(driver.context(1), driver.write(sink, 1, [rows(0, 3)]))
    folder = warehouse.resolve()
    properties = {"type": "sql", "uri": f"sqlite:///{folder}/catalog.db"}
    properties["warehouse"] = f"file://{folder}"
    table = pyiceberg_catalog("shop", **properties).load_table("db.t")  # as a reader does
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2]
    with pytest.raises(NoSuchTableError):  # pyiceberg's SQL catalog keys tables by name
        pyiceberg_catalog("flintlock", **properties).load_table("db.t")
    default = IcebergSink("db.u", warehouse=str(warehouse), schema=SCHEMA)
    assert default.catalog[0] == "flintlock"
    with pytest.raises(SinkOutputError, match="catalog_name must be a non-empty string"):
        IcebergSink("db.v", warehouse=str(warehouse), catalog_name="")
