"""The sinks the sink chaos suite (tests/spark/test_chaos_sinks.py) runs against: one
``ChaosTarget`` per sink says how to make the sink, how to read its output back with the
system's own reader, and what it may have left behind.

A target is made from the run's base folder, in the test process (``setup``,
``read_back``, ``leftovers``, ``teardown``) and again in each driver process
(``make_sink``): keep everything it needs derivable from that folder (and the
environment, e.g. a database's address), never in memory between the two.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import pyarrow.parquet as pq

from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.sinks.files import REGISTRY, FileSink


class ChaosTarget(ABC):
    """One sink under chaos: the job writes ``unbounded_jobs.OUT`` rows (k, id, total)
    into ``make_sink()``; at the end ``read_back()`` must hold each row exactly once and
    ``leftovers()`` must be empty."""

    name: ClassVar[str]
    """The target's name (the test's parameter, and the plan's ``target``)."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def setup(self) -> None:  # noqa: B027 - optional
        """In the test, before the first driver: create what the sink writes into, or
        ``pytest.skip`` if the system is not there (a database server)."""

    def teardown(self) -> None:  # noqa: B027 - optional
        """In the test, after the checks (also when they failed): drop what setup made."""

    @abstractmethod
    def make_sink(self) -> TwoPhaseCommitSink:
        """The sink, in a driver process (picklable; the chaos wrapper goes around it).
        Every driver of the run makes it again and must get the same output: the first
        run may be killed after preparing the output, before its first checkpoint."""

    @abstractmethod
    def read_back(self) -> list[dict[str, Any]]:
        """Every committed row, read with the system's own reader (not flintlock's)."""

    @abstractmethod
    def leftovers(self) -> list[str]:
        """What should not be there at the end: staged or unreferenced data files,
        prepared transactions, temporary tables... (a readable name for each)."""


TARGETS: dict[str, type[ChaosTarget]] = {}
"""The chaos targets by name; the suite runs each."""


def register(target: type[ChaosTarget]) -> type[ChaosTarget]:
    """Class decorator: add ``target`` to TARGETS."""
    TARGETS[target.name] = target
    return target


@register
class FileSinkTarget(ChaosTarget):
    """The FileSink: Parquet files in ``<base>/out``, read with pyarrow.parquet."""

    name = "files"

    @property
    def output(self) -> Path:
        return self.base / "out"

    def make_sink(self) -> TwoPhaseCommitSink:
        return FileSink(str(self.output))

    def read_back(self) -> list[dict[str, Any]]:
        if not self.output.is_dir():
            return []
        return pq.read_table(self.output).to_pylist()

    def leftovers(self) -> list[str]:
        """Anything but published ``part-*.parquet`` files and the jobs' registry files:
        staging folders and files, half-written registry files."""
        left = []
        for folder, _, files in os.walk(self.output):
            relative = Path(folder).relative_to(self.output)
            for file in files:
                path = relative / file
                published = path.parent == Path(".") and file.startswith("part-")
                registry = path.parent == Path(REGISTRY) and file.endswith(".json")
                if not (published and file.endswith(".parquet")) and not registry:
                    left.append(str(path))
            if relative != Path(".") and relative != Path(REGISTRY) and not files:
                left.append(f"{relative}/ (empty folder)")
        return sorted(left)


@register
class DeltaTarget(ChaosTarget):
    """The DeltaSink: a Delta table in ``<base>/delta``, read with deltalake's own reader."""

    name = "delta"

    @property
    def output(self) -> Path:
        return self.base / "delta"

    def make_sink(self) -> TwoPhaseCommitSink:
        from flintlock.sinks.delta import DeltaSink

        return DeltaSink(str(self.output))

    def read_back(self) -> list[dict[str, Any]]:
        from delta_tables import read_delta

        if not (self.output / "_delta_log").is_dir():
            return []
        return read_delta(self.output).to_pylist()

    def leftovers(self) -> list[str]:
        """Parquet files in the table's folder that its newest version does not add."""
        from deltalake import DeltaTable

        table = DeltaTable(str(self.output))
        referenced = {os.path.normpath(uri.removeprefix("file://")) for uri in table.file_uris()}
        found = {
            os.path.normpath(os.path.join(folder, file))
            for folder, _, files in os.walk(self.output)
            if "_delta_log" not in folder
            for file in files
        }
        return sorted(os.path.relpath(path, self.output) for path in found - referenced)


@register
class IcebergTarget(ChaosTarget):
    """The IcebergSink: table ``chaos.out`` in the embedded SQL catalog of
    ``<base>/warehouse``, read with pyiceberg's own scan."""

    name = "iceberg"
    table = "chaos.out"

    @property
    def warehouse(self) -> Path:
        return self.base / "warehouse"

    def make_sink(self) -> TwoPhaseCommitSink:
        from unbounded_jobs import OUT

        from flintlock.sinks.iceberg import IcebergSink

        return IcebergSink(self.table, warehouse=str(self.warehouse), schema=OUT)

    def _table(self) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog(
            "flintlock",
            uri=f"sqlite:///{self.warehouse}/catalog.db",
            warehouse=f"file://{self.warehouse}",
        )
        return catalog.load_table(self.table)

    def read_back(self) -> list[dict[str, Any]]:
        return self._table().scan().to_arrow().to_pylist()

    def leftovers(self) -> list[str]:
        """Parquet data files under the table's folder that its current snapshot does
        not reference (staged by failed attempts or never committed)."""
        table = self._table()
        referenced = {
            task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()
        }
        location = table.location().removeprefix("file://")
        found = {
            os.path.join(folder, file)
            for folder, _, files in os.walk(f"{location}/data")
            for file in files
            if file.endswith(".parquet")
        }
        return sorted(os.path.relpath(path, location) for path in found - referenced)


@register
class PostgresTarget(ChaosTarget):
    """The PostgresSink: table ``chaos_out`` on a server of the test's own (started in
    ``setup``, its conninfo in ``<base>/postgres.conninfo`` for the drivers), read with
    a plain SELECT."""

    name = "postgres"
    table = "chaos_out"

    def setup(self) -> None:
        from postgres_server import start_server

        self.server = start_server(max_prepared_transactions=20)
        (self.base / "postgres.conninfo").write_text(self.server.conninfo())

    def teardown(self) -> None:
        self.server.stop()

    def conninfo(self) -> str:
        return (self.base / "postgres.conninfo").read_text()

    def make_sink(self) -> TwoPhaseCommitSink:
        from unbounded_jobs import OUT

        from flintlock.sinks.postgres import PostgresSink

        return PostgresSink(self.conninfo(), self.table, schema=OUT)

    def read_back(self) -> list[dict[str, Any]]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.conninfo(), row_factory=dict_row) as connection:
            return connection.execute(f"SELECT k, id, total FROM {self.table}").fetchall()

    def leftovers(self) -> list[str]:
        """Prepared transactions still open on the server (each holds its rows' locks) and
        staging tables (a subtask's staged rows, dropped when published or aborted)."""
        import psycopg

        with psycopg.connect(self.conninfo()) as connection:
            rows = connection.execute("SELECT gid FROM pg_prepared_xacts ORDER BY gid").fetchall()
            stages = connection.execute(
                "SELECT relname FROM pg_class WHERE relname LIKE '\\_flintlock\\_stage\\_%'"
            ).fetchall()
        return [f"prepared transaction {gid}" for (gid,) in rows] + [
            f"staging table {name}" for (name,) in stages
        ]


@register
class PostgresPerSubtaskTarget(PostgresTarget):
    """The PostgresSink with ``visibility="subtask"``: each subtask's rows written straight
    into the table in a prepared transaction, committed one by one by the driver."""

    name = "postgres-subtask"

    def make_sink(self) -> TwoPhaseCommitSink:
        from unbounded_jobs import OUT

        from flintlock.sinks.postgres import PostgresSink

        return PostgresSink(self.conninfo(), self.table, schema=OUT, visibility="subtask")


class KafkaTarget(ChaosTarget):
    """The KafkaSink, exactly once: a topic of its own (``PARTITIONS`` partitions) on a
    broker (the one given, else one of the target's own started in ``setup``), its
    address and topic in ``<base>/kafka.json`` for the drivers; read back as a
    ``read_committed`` consumer sees it, one JSON object per record."""

    name = "kafka"
    PARTITIONS = 2
    MARKER_SECONDS = 10.0
    """How long ``leftovers`` waits for the last commit's markers (far below the 60 s
    after which the broker itself aborts a transaction left open)."""

    def __init__(self, base: Path, broker: Any = None) -> None:
        super().__init__(base)
        self.broker = broker
        self.own_broker = False

    def setup(self) -> None:
        import uuid

        from kafka_server import start_broker

        if self.broker is None:
            self.broker, self.own_broker = start_broker(), True
        topic = self.broker.create_topic(f"chaos-out-{uuid.uuid4().hex[:8]}", self.PARTITIONS)
        settings = {"bootstrap": self.broker.bootstrap, "topic": topic}
        (self.base / "kafka.json").write_text(json.dumps(settings))

    def teardown(self) -> None:
        if self.own_broker:
            self.broker.remove()

    @property
    def settings(self) -> dict[str, str]:
        return dict(json.loads((self.base / "kafka.json").read_text()))

    def make_sink(self) -> TwoPhaseCommitSink:
        from flintlock.sinks.kafka import KafkaSink

        return KafkaSink(self.settings["topic"], self.settings["bootstrap"])

    def read_back(self) -> list[dict[str, Any]]:
        records = self.broker.records(self.settings["topic"], "read_committed")
        return [json.loads(record.value()) for record in records]

    def leftovers(self) -> list[str]:
        """Staged files of the sink's writers, and partitions whose last stable offset is
        below their high watermark (a transaction left open holds read_committed
        consumers back there)."""
        staged = [
            str(path.relative_to(self.base))
            for path in self.base.glob("chk/**/kafka-staging/**/*")
            if path.is_file()
        ]
        deadline = time.monotonic() + self.MARKER_SECONDS
        while True:  # a committed transaction's markers are written after the commit returns
            stable = self.end_offsets("read_committed")
            high = self.end_offsets("read_uncommitted")
            if stable == high or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        open_ = [
            f"partition {p}: last stable offset {stable[p]} below high watermark {high[p]}"
            for p in sorted(high)
            if stable[p] != high[p]
        ]
        return staged + open_

    def end_offsets(self, isolation_level: str) -> dict[int, int]:
        """Each partition's end as a consumer of ``isolation_level`` sees it: the last
        stable offset (read_committed) or the high watermark (read_uncommitted)."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        level = IsolationLevel[isolation_level.upper()]
        topic = self.settings["topic"]
        asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(self.PARTITIONS)}
        admin = self.broker.admin()  # kept until the answers are in
        futures = admin.list_offsets(asked, isolation_level=level, request_timeout=30)
        return {tp.partition: future.result(timeout=60).offset for tp, future in futures.items()}
