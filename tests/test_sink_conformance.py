"""The conformance kit for 2PC sinks (``flintlock.testing``) on every built-in sink, on
its real storage: FileSink on a local folder and on the moto S3 server, DeltaSink,
IcebergSink (SQL catalog on SQLite), PostgresSink (a real server, both visibilities),
KafkaSink (exactly once, on a real broker) and the example plugin's JsonLinesSink; and
broken sinks the kit must fail, naming the scenario and what was wrong. No Spark: the
kit runs the task lifecycle in-process."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec
from deltalake import DeltaTable
from flintlock_example_plugin.jsonl_sink import JsonLinesSink
from kafka_server import KafkaBroker
from s3_server import S3Server

from flintlock.core.conformance.scenario import id_problems
from flintlock.errors import SinkConformanceError
from flintlock.plugin_api import list_folder
from flintlock.sinks.delta import DeltaSink
from flintlock.sinks.files import FileSink
from flintlock.sinks.iceberg import IcebergSink
from flintlock.sinks.iceberg_tables import catalog_spec, load_catalog
from flintlock.sinks.kafka import KafkaSink
from flintlock.sinks.postgres import PostgresSink
from flintlock.sinks.postgres_sql import STAGE_PREFIX
from flintlock.testing import (
    SCENARIOS,
    SCHEMA,
    OutputPlace,
    SinkConformance,
    SinkTarget,
    run_scenario,
)

NO_ROWS = SCHEMA.empty_table()


def parquet_rows(filesystem: pafs.FileSystem, paths: list[str]) -> pa.Table:
    tables = [pq.read_table(path, filesystem=filesystem) for path in paths]
    return pa.concat_tables(tables) if tables else NO_ROWS


def unreferenced_parquet(folder: str, referenced: set[str]) -> list[str]:
    """Parquet files under ``folder`` that ``referenced`` (their base names) leaves out."""
    return sorted(
        str(path) for path in Path(folder).rglob("*.parquet") if path.name not in referenced
    )


class FileTarget(SinkTarget[FileSink]):
    """FileSink on a local folder, or (``s3``) under a prefix of its own on moto's S3."""

    def __init__(self, s3: S3Server | None = None) -> None:
        self.s3 = s3

    @property
    def label(self) -> str:
        return "FileSink on S3" if self.s3 else "FileSink"

    def make_sink(self, place: OutputPlace) -> FileSink:
        path = self.s3.uri(f"conformance/{place.name}") if self.s3 else f"{place.folder}/files"
        return FileSink(path, mode="append")

    def read_committed(self, sink: Any) -> pa.Table:
        return parquet_rows(sink.filesystem()[0], sink.committed_files())

    def left_behind(self, sink: Any) -> list[str]:
        filesystem, base = sink.filesystem()
        staged = [
            info.path
            for info in list_folder(filesystem, base, recursive=True)
            if "/_staging-" in info.path and info.type == pafs.FileType.File
        ]
        if self.s3 is not None:  # and multipart uploads never completed nor aborted
            listed = self.s3.client().list_multipart_uploads(Bucket=base.split("/", 1)[0])
            prefix = base.split("/", 1)[1] + "/"
            uploads = [u["Key"] for u in listed.get("Uploads", []) if u["Key"].startswith(prefix)]
            staged += [f"upload {key}" for key in uploads]
        return staged


class DeltaTarget(SinkTarget[DeltaSink]):
    """DeltaSink on a local folder, read back with deltalake's reader."""

    def make_sink(self, place: OutputPlace) -> DeltaSink:
        return DeltaSink(f"{place.folder}/table", mode="append")

    def read_committed(self, sink: Any) -> pa.Table:
        if not os.path.isdir(f"{sink.uri}/_delta_log"):
            return NO_ROWS
        return DeltaTable(sink.uri).to_pyarrow_table()

    def left_behind(self, sink: Any) -> list[str]:
        if not os.path.isdir(sink.uri):
            return []
        referenced = set()
        if os.path.isdir(f"{sink.uri}/_delta_log"):
            referenced = {os.path.basename(f) for f in DeltaTable(sink.uri).file_uris()}
        return unreferenced_parquet(sink.uri, referenced)


class IcebergTarget(SinkTarget[IcebergSink]):
    """IcebergSink with a SQL catalog on SQLite in the place's folder (its warehouse)."""

    def __init__(self) -> None:
        self.warehouses: dict[str, str] = {}

    def make_sink(self, place: OutputPlace) -> IcebergSink:
        self.warehouses[f"db.{place.name}"] = place.folder
        return IcebergSink(f"db.{place.name}", warehouse=place.folder, schema=SCHEMA, mode="append")

    def _table(self, sink: Any) -> Any:
        catalog = load_catalog(catalog_spec(None, self.warehouses[sink.table], "kit"), "kit")
        return catalog.load_table(sink.table) if catalog.table_exists(sink.table) else None

    def read_committed(self, sink: Any) -> pa.Table:
        table = self._table(sink)
        return table.scan().to_arrow() if table is not None else NO_ROWS

    def left_behind(self, sink: Any) -> list[str]:
        table = self._table(sink)
        files = table.inspect.files().column("file_path").to_pylist() if table else []
        referenced = {os.path.basename(f) for f in files}
        return unreferenced_parquet(self.warehouses[sink.table], referenced)


class PostgresTarget(SinkTarget[PostgresSink]):
    """PostgresSink on a real server: staging tables (``checkpoint``) or prepared
    transactions (``subtask``) of one database."""

    def __init__(self, conninfo: str, visibility: str) -> None:
        self.conninfo = conninfo
        self.visibility = visibility

    @property
    def label(self) -> str:
        return f"PostgresSink(visibility={self.visibility!r})"

    def make_sink(self, place: OutputPlace) -> PostgresSink:
        table = f"public.{place.name}"
        return PostgresSink(self.conninfo, table, schema=SCHEMA, visibility=self.visibility)

    def _query(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.conninfo) as connection:
            return connection.execute(statement, args).fetchall()

    def read_committed(self, sink: Any) -> pa.Table:
        [(exists,)] = self._query("SELECT to_regclass(%s) IS NOT NULL", sink.table)
        if not exists:
            return NO_ROWS
        ids = [row[0] for row in self._query(f"SELECT id FROM {sink.table}")]
        return pa.table({"id": pa.array(ids, pa.int64())})

    def left_behind(self, sink: Any) -> list[str]:
        prepared = self._query(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
        )
        stages = self._query(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND starts_with(relname, %s)",
            STAGE_PREFIX,
        )
        return [f"prepared {gid}" for (gid,) in prepared] + [f"table {t}" for (t,) in stages]


class JsonLinesTarget(SinkTarget[JsonLinesSink]):
    """The example plugin's JsonLinesSink (``sink``: the class, or a broken subclass)."""

    def __init__(self, sink: type[JsonLinesSink] = JsonLinesSink) -> None:
        self.sink = sink

    @property
    def label(self) -> str:
        return self.sink.__name__

    def make_sink(self, place: OutputPlace) -> JsonLinesSink:
        return self.sink(place.folder)

    def read_committed(self, sink: Any) -> pa.Table:
        parts = sorted(Path(sink.folder).glob("part-*.jsonl"))
        ids = [json.loads(line)["id"] for part in parts for line in part.read_text().splitlines()]
        return pa.table({"id": pa.array(ids, pa.int64())})

    def left_behind(self, sink: Any) -> list[str]:
        return sorted(str(path) for path in Path(sink.folder).glob("_staging-*/*"))


class KafkaTarget(SinkTarget[KafkaSink]):
    """KafkaSink exactly once on the session's broker: the place's name is the topic (2
    partitions, made on first use), read back with a ``read_committed`` consumer. Left
    behind: transactions still open on the topic (a partition whose committed end is
    short of its end), and staged files in the kit's checkpoint folder (beside the
    place's folder: the sink stages in the job's checkpoint storage)."""

    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker
        self.folders: dict[str, str] = {}

    def make_sink(self, place: OutputPlace) -> KafkaSink:
        if place.name not in self.folders:
            self.broker.create_topic(place.name, partitions=2)
            self.folders[place.name] = place.folder
        return KafkaSink(place.name, self.broker.bootstrap, value="json")

    def read_committed(self, sink: Any) -> pa.Table:
        records = self.broker.records(sink.topic, "read_committed")
        ids = [json.loads(record.value())["id"] for record in records]
        return pa.table({"id": pa.array(ids, pa.int64())})

    def left_behind(self, sink: Any) -> list[str]:
        partitions = [TopicPartition(sink.topic, p) for p in range(2)]
        ends, admin = {}, self.broker.admin()  # kept until its answers arrive
        for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
            asked = {partition: OffsetSpec.latest() for partition in partitions}
            found = admin.list_offsets(asked, isolation_level=level)
            ends[level] = {tp.partition: f.result(timeout=30).offset for tp, f in found.items()}
        committed, written = (
            ends[IsolationLevel.READ_COMMITTED],
            ends[IsolationLevel.READ_UNCOMMITTED],
        )
        left = [
            f"open transaction on {sink.topic}[{p}] (committed {committed[p]} of {written[p]})"
            for p in sorted(written)
            if committed[p] < written[p]
        ]
        checkpoints = Path(self.folders[sink.topic]).parent / "checkpoints"
        return left + sorted(str(path) for path in checkpoints.rglob("kafka-staging/**/*.arrow"))


TARGETS = ["files", "files-s3", "delta", "iceberg", "postgres", "postgres-prepared", "kafka"]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> SinkTarget[Any]:
    kind = request.param
    if kind.startswith("postgres"):
        conninfo = request.getfixturevalue("pg_conninfo")
        return PostgresTarget(conninfo, "subtask" if kind.endswith("prepared") else "checkpoint")
    if kind == "files-s3":
        return FileTarget(request.getfixturevalue("s3"))
    if kind == "kafka":
        return KafkaTarget(request.getfixturevalue("kafka"))
    return {
        "files": FileTarget,
        "delta": DeltaTarget,
        "iceberg": IcebergTarget,
    }[kind]()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_sink_passes_every_scenario(
    target: SinkTarget[Any], scenario: str, tmp_path: Path
) -> None:
    run_scenario(target, scenario, tmp_path)


class TestTheExamplePluginsSink(SinkConformance[JsonLinesSink]):
    """The kit as a sink author runs it: a pytest class, one test per scenario."""

    def sink_target(self) -> JsonLinesTarget:
        return JsonLinesTarget()


# ---- the kit fails broken sinks, naming the scenario and what was wrong ----


class CommitsTwiceSink(JsonLinesSink):
    """Broken: its commit copies each staged file to a new name, every time it runs."""

    def commit(self, context: Any, committables: list[Any]) -> None:
        for file in committables:
            copy = file["final"].replace(".jsonl", f"-{uuid.uuid4().hex[:6]}.jsonl")
            shutil.copy(file["staging"], copy)


class LosesLastDataSink(JsonLinesSink):
    """Broken: buffers rows and writes them at pre_commit; its finish drops the buffer
    (so the final checkpoint, the only one after finish, loses its rows)."""

    def begin_transaction(self, context: Any, checkpoint_id: int) -> Any:
        self.buffered: list[pa.RecordBatch] = []
        return super().begin_transaction(context, checkpoint_id)

    def write(self, transaction: Any, batch: pa.RecordBatch) -> None:
        self.buffered.append(batch)

    def finish(self, transaction: Any) -> None:
        self.buffered = []

    def pre_commit(self, transaction: Any) -> list[Any]:
        for batch in self.buffered:
            super().write(transaction, batch)
        return super().pre_commit(transaction)


class NeverCleansSink(JsonLinesSink):
    """Broken: leaves the staging files of attempts that never committed."""

    def abort_uncommitted(self, context: Any, keep: list[Any]) -> None:
        pass


@pytest.mark.parametrize(
    ("sink", "scenario", "problem"),
    [
        (CommitsTwiceSink, "commit_twice", "duplicate ids [0, 1, 2, 3, 4, 5, 6, 7] (8)"),
        (CommitsTwiceSink, "fail_every_n_records", "duplicate ids"),
        (LosesLastDataSink, "bounded_final_checkpoint", "missing ids [10, 11, 12"),
        (LosesLastDataSink, "stop_with_drain", "missing ids [10, 11, 12, 13, 14, 15, 16] (7)"),
        (LosesLastDataSink, "fail_every_n_records", "missing ids"),
        (NeverCleansSink, "abort_after_pre_commit", "left behind ["),
    ],
)
def test_the_kit_fails_a_broken_sink_naming_the_scenario_and_what_was_wrong(
    sink: type[JsonLinesSink], scenario: str, problem: str, tmp_path: Path
) -> None:
    with pytest.raises(SinkConformanceError) as failure:
        run_scenario(JsonLinesTarget(sink), scenario, tmp_path)
    message = str(failure.value)
    assert message.startswith(f"{sink.__name__} fails scenario '{scenario}': ")
    assert problem in message


def test_a_failure_names_duplicate_missing_and_unexpected_ids() -> None:
    assert id_problems([0, 1, 1, 3, 9], [0, 1, 2, 3]) == (
        "duplicate ids [1] (1) (committed more than once); missing ids [2] (1) (never "
        "committed); unexpected ids [9] (1) (not committed by then); 5 rows seen, 4 expected"
    )
    assert id_problems([2, 0, 1], [0, 1, 2]) == ""
