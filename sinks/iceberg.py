"""IcebergSink: rows into an Apache Iceberg table, exactly once, through pyiceberg.

Writers (Spark tasks) write Parquet data files, carrying the table's field ids, under
``<table location>/data/flintlock-<job id>-<sink>/chk-<N>/``, one per partition value
per transaction, named with run, subtask and Spark's task attempt id. The committer (the
driver) adds each completed checkpoint's files to the table in one transaction whose
snapshot summary records ``flintlock.job-id`` (``<job id>/<sink>``) and
``flintlock.max-committed-checkpoint-id``; before committing it reads the newest such
record of this sink from the table's snapshots and skips what is already in, so a
commit repeated after a driver crash adds nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flintlock import CommittableError, SinkOutputError, TwoPhaseCommitSink, hookimpl
from flintlock.plugin_api import OUTPUT_MODES, CommitContext, SinkWriterContext, safe_name
from flintlock.sinks import iceberg_stats
from flintlock.sinks import iceberg_tables as tables
from flintlock.sinks.iceberg_commit import IcebergCommitter
from flintlock.sinks.iceberg_stats import IcebergDataFile


@dataclass
class _Transaction:
    folder: str
    stem: str
    files: list[IcebergDataFile] = field(default_factory=list)
    writers: dict[Any, tuple[pq.ParquetWriter, Any, IcebergDataFile, list[Any]]] = field(
        default_factory=dict
    )


class IcebergSink(IcebergCommitter, TwoPhaseCommitSink[_Transaction, IcebergDataFile]):
    """Writes to the Iceberg table ``table`` ("namespace.name") of a pyiceberg catalog.

    ``catalog``: the catalog's properties (``{"type": "sql", "uri": ..., "warehouse":
    ...}``, ``{"type": "rest", ...}``; an optional ``"name"`` key), or the name of one in
    the user's pyiceberg configuration; or ``warehouse``: a folder holding the embedded
    default, a SQL catalog on ``<warehouse>/catalog.db`` (SQLite, no server) named
    ``catalog_name`` ("flintlock"; a reader loads it by that name). A missing
    namespace is created, and a missing table from ``schema`` (partitioned by the
    identity of the ``partition_by`` columns). ``mode`` says what a new run may do to a
    table that holds rows: ``error`` (default) refuses, ``append`` adds, ``overwrite``
    replaces them in the run's first commit.
    """

    name = "iceberg"
    commits_beside_next_epoch = True  # a commit adds a snapshot; tasks write new files

    def __init__(
        self,
        table: str,
        catalog: dict[str, Any] | str | None = None,
        warehouse: str | None = None,
        schema: pa.Schema | None = None,
        mode: str = "error",
        partition_by: list[str] | None = None,
        catalog_name: str = tables.EMBEDDED_CATALOG,
    ) -> None:
        who = f"IcebergSink('{table}')"
        if mode not in OUTPUT_MODES:
            raise SinkOutputError(f"{who}: mode {mode!r} is not one of {', '.join(OUTPUT_MODES)}")
        if schema is not None and not isinstance(schema, pa.Schema):
            raise SinkOutputError(f"{who}: schema must be a pyarrow.Schema, not {schema!r}")
        try:
            self.identifier = tables.split_identifier(table, who)
            self.catalog = tables.catalog_spec(catalog, warehouse, who, catalog_name)
        except ValueError as error:
            raise SinkOutputError(str(error)) from error
        tables.pyiceberg("pyiceberg.catalog", who)  # a missing extra is refused here
        self.table = table
        self.schema = schema
        self.mode = mode
        self.partition_by = list(partition_by or [])
        self.resolved: dict[str, Any] | None = None
        """Set on the driver before tasks run: the table's location, Iceberg schema and
        partition spec (JSON) and FileIO properties, so tasks never open the catalog."""
        self._fitting: set[pa.Schema] = set()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_fitting"] = set()
        for opened in ("_table_model", "_catalog", "_io", "_kept_table"):  # rebuilt where needed
            state.pop(opened, None)
        return state

    # ---- writer side ----

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> _Transaction:
        task = context.task
        folder = self.job_folder(task.job_id, context.sink_uid) + f"/chk-{checkpoint_id}"
        stem = f"{task.run_id}-{task.subtask_index}-{task.attempt_id}"
        return _Transaction(folder, stem)

    def write(self, transaction: _Transaction, batch: pa.RecordBatch) -> None:
        model = self.table_model()
        if batch.schema not in self._fitting:  # checked once per schema
            problems = tables.schema_misfit(batch.schema, model["schema"])
            if problems:
                raise self._misfit(problems, model)
            self._fitting.add(batch.schema)
        try:
            batch = tables.conform(batch, model["file_schema"])
        except ValueError as error:
            raise self._misfit([str(error)], model) from error
        for key, rows in tables.split_by_partition(batch, model["spec"], model["schema"]):
            if key not in transaction.writers:
                path = f"{transaction.folder}/{transaction.stem}-{len(transaction.files)}.parquet"
                stream = self.file_io().new_output(path).create(overwrite=True)
                file: IcebergDataFile = {"path": path, "rows": 0}
                footer: list[pq.FileMetaData] = []  # the writer's footer, once closed
                writer = pq.ParquetWriter(stream, batch.schema, metadata_collector=footer)
                transaction.writers[key] = (writer, stream, file, footer)
                transaction.files.append(file)
            writer, _, file, _ = transaction.writers[key]
            writer.write_batch(rows)
            file["rows"] += rows.num_rows

    def _misfit(self, problems: list[str], model: dict[str, Any]) -> SinkOutputError:
        return SinkOutputError(
            f"the stream's rows do not fit Iceberg table {self.table}: "
            f"{'; '.join(problems)} (the table's schema: {model['schema']})"
        )

    def finish(self, transaction: _Transaction) -> None:
        self._close(transaction)

    def pre_commit(self, transaction: _Transaction) -> list[IcebergDataFile]:
        self._close(transaction)
        return list(transaction.files)

    def abort(self, transaction: _Transaction) -> None:
        self._close(transaction)
        for file in transaction.files:
            self.delete_file(file["path"])

    def _close(self, transaction: _Transaction) -> None:
        """Close every open data file and record its size for the committer."""
        io = self.file_io() if transaction.writers else None
        for writer, stream, file, footer in transaction.writers.values():
            writer.close()
            stream.close()
            if footer:  # the committer builds the DataFile from these, not from the file
                stats = iceberg_stats.file_statistics(footer[0], self.table_model())
                if stats is not None:
                    file["stats"] = stats
        transaction.writers.clear()
        for file in transaction.files:
            if "bytes" not in file and io is not None:
                file["bytes"] = len(io.new_input(file["path"]))

    # ---- where things are ----

    def job_folder(self, job_id: str, sink_uid: str) -> str:
        """Where this job's writers put their files, under the table's location."""
        location = self.table_model()["location"]
        return f"{location}/data/flintlock-{job_id or 'local'}-{safe_name(sink_uid or 'sink')}"

    def table_model(self) -> dict[str, Any]:
        """The resolved table as pyiceberg objects (in a task: rebuilt from JSON)."""
        model = getattr(self, "_table_model", None)
        if model is None:
            if self.resolved is None:  # not resolved on a driver: read the catalog now
                self.resolve(self.load_table())
            assert self.resolved is not None
            schema_module = tables.pyiceberg("pyiceberg.schema")
            spec_module = tables.pyiceberg("pyiceberg.partitioning")
            schema = schema_module.Schema.model_validate_json(self.resolved["schema"])
            model = {
                "location": self.resolved["location"],
                "schema": schema,
                "file_schema": tables.file_schema(schema),
                "spec": spec_module.PartitionSpec.model_validate_json(self.resolved["spec"]),
                "properties": self.resolved.get("properties", {}),
            }
            self._table_model: dict[str, Any] | None = model
        return model

    def resolve(self, table: Any) -> None:
        """Remember what tasks need of ``table``; refuse partitioning flintlock cannot
        split rows by."""
        problems = tables.check_partitioning(table.spec(), table.schema())
        if problems:
            raise SinkOutputError(
                f"Iceberg table {self.table} is partitioned by {', '.join(problems)}; flintlock "
                f"writes one file per partition value and cannot compute it here: install "
                f"pyiceberg-core (bucket, truncate and time transforms) or partition by identity"
            )
        self.resolved = {
            "location": table.location().rstrip("/"),
            "schema": table.schema().model_dump_json(),
            "spec": table.spec().model_dump_json(),
            "properties": dict(table.properties),
            "io": dict(table.io.properties),
        }
        self._table_model = None
        self._fitting = set()

    def file_io(self) -> Any:
        """The table's FileIO (pyiceberg), as the catalog configured it."""
        io = getattr(self, "_io", None)
        if io is None:
            properties = (self.resolved or {}).get("io") or self.catalog_with_storage()[1]
            location = self.table_model()["location"]
            io = tables.pyiceberg("pyiceberg.io").load_file_io(properties, location)
            self._io = io
        return io

    def filesystem(self) -> tuple[pafs.FileSystem, Callable[[str], str]]:
        """A pyarrow file system for listing the table's folder, and how a table path
        maps to a path in it."""
        io = self.file_io()
        scheme, netloc, _ = io.parse_location(self.table_model()["location"])
        return io.fs_by_scheme(scheme, netloc), lambda path: io.parse_location(path)[2]

    def delete_file(self, path: str) -> None:
        """Delete a data file flintlock wrote, if it is there."""
        io = self.file_io()
        if io.new_input(path).exists():
            io.delete(path)

    def verify(self, file: IcebergDataFile, context: CommitContext) -> None:
        """Check a committable's data file is the one written (present, same size)."""
        try:
            size = len(self.file_io().new_input(file["path"]))
        except (FileNotFoundError, OSError) as error:
            raise CommittableError(
                f"the data file {file['path']} of Iceberg table {self.table} is missing: its "
                f"rows are lost ({error}); run the job anew (new_run=True) with "
                f"mode='overwrite' to write them again"
            ) from error
        if size != file.get("bytes", size):
            raise CommittableError(
                f"the data file {file['path']} of Iceberg table {self.table} has {size} "
                f"bytes, {file['bytes']} were written (truncated or changed); checkpoint "
                f"{context.checkpoint_id} of job '{context.job_name}' cannot be committed"
            )


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("iceberg", IcebergSink)
