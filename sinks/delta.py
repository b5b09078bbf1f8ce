"""DeltaSink: a Delta Lake table written exactly once through two-phase commit (delta-rs,
no JVM).

Each subtask writes Parquet files straight into the table's folder, named with the job
id, the sink's uid, run, checkpoint, subtask and Spark's task attempt id: readers of the
table never see them until a commit's ``add`` actions name them. Pre-commit closes the
files and returns each one's path, size, rows, partition values and min/max statistics.
The committer makes ONE Delta commit per completed checkpoint, carrying the application
transaction ``(app id, checkpoint id)``; delta-rs does not refuse a repeated one, so the
commit first reads the app id's version and skips a checkpoint already in the table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flintlock import CommittableError, SinkOutputError, TwoPhaseCommitSink, hookimpl
from flintlock.plugin_api import OUTPUT_MODES, CommitContext, OutputCheckContext, SinkWriterContext
from flintlock.sinks.delta_files import (
    DeltaDataFile,
    arrow_filesystem,
    checkpoint_of,
    conform,
    delete_if_exists,
    delta_typed,
    deltalake,
    file_prefix,
    file_stats,
    is_sink_file,
    list_data_files,
    load_table,
    partition_folder,
    schema_differences,
    split_by_partition,
    stats_json,
    stuck,
    verify_file,
)


@dataclass
class _OpenFile:
    writer: pq.ParquetWriter
    relative: str
    partition: dict[str, str | None]
    rows: int = 0


@dataclass
class _Transaction:
    stem: str
    target: pa.Schema | None = None
    """The table's columns (partition columns included) batches are cast to."""
    partition_by: list[str] = field(default_factory=list)
    new_table: bool = False
    opened: dict[str, _OpenFile] = field(default_factory=dict)
    files: list[DeltaDataFile] = field(default_factory=list)


class DeltaSink(TwoPhaseCommitSink[_Transaction, DeltaDataFile]):
    """Writes a stream into the Delta table at ``uri`` (a local path or a URI pyarrow and
    delta-rs both resolve), created from the stream's schema if it does not exist.

    ``mode``: ``"error"`` (default) refuses a new run if the table holds data;
    ``"append"`` adds to it; ``"overwrite"`` replaces its rows at the run's first commit.
    ``partition_by``: the partition columns of a new table (an existing table's must
    match; None takes the table's).
    """

    name = "delta"
    commits_beside_next_epoch = True  # a commit adds a table version; tasks write new files

    def __init__(
        self,
        uri: str,
        mode: str = "error",
        partition_by: list[str] | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        if mode not in OUTPUT_MODES:
            modes = ", ".join(OUTPUT_MODES)
            raise SinkOutputError(f"DeltaSink mode {mode!r} is not one of {modes}")
        if isinstance(partition_by, str):
            partition_by = [partition_by]
        deltalake()  # a missing install is refused when the job is built
        self.uri = uri if "://" in uri else os.path.abspath(uri)
        self.mode = mode
        self.partition_by = list(partition_by) if partition_by is not None else None
        self.storage_options = storage_options
        self._loaded: Any = None
        """The committer's table, brought up to date at each use (not pickled)."""

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_loaded": None}

    def table(self) -> Any:
        """The newest version of the table, or None if there is no Delta table at ``uri``.
        The driver keeps the table it loaded and reads only the log's newer versions."""
        module = deltalake()
        try:
            if self._loaded is not None:
                self._loaded.update_incremental()
                return self._loaded
            self._loaded = load_table(self.uri, self.delta_options())
            return self._loaded
        except (module.exceptions.DeltaError, OSError) as error:
            self._loaded = None
            raise SinkOutputError(
                f"DeltaSink cannot read the Delta table {self.uri}: {type(error).__name__}: {error}"
            ) from error

    def delta_options(self) -> dict[str, str] | None:
        """delta-rs's storage options: the environment's, then the sink's own (which win)."""
        return self.job_storage_options.merged_for_deltalake(self.storage_options)

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        """The file system and root folder of the table's data files."""
        if "://" in self.uri:
            return arrow_filesystem(self.uri, self.delta_options())
        return pafs.LocalFileSystem(), self.uri.rstrip("/")

    @staticmethod
    def app_id(job_id: str, sink_uid: str) -> str:
        """The Delta application id of one sink of one job (its commits' ``txn``)."""
        return f"flintlock-{job_id or 'local'}-{sink_uid}"

    # ---- writer side ----

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> _Transaction:
        task = context.task
        prefix = file_prefix(task.job_id, context.sink_uid)
        return _Transaction(
            f"{prefix}{task.run_id}-c{checkpoint_id}-s{task.subtask_index}-a{task.attempt_id}"
        )

    def write(self, transaction: _Transaction, batch: pa.RecordBatch) -> None:
        if transaction.target is None:
            self._resolve(transaction, batch.schema)
        assert transaction.target is not None
        rows = conform(batch, transaction.target)
        for partition, part in split_by_partition(rows, transaction.partition_by):
            folder = partition_folder(partition)
            file = transaction.opened.get(folder) or self._open(transaction, folder, partition)
            file.writer.write_table(part)
            file.rows += part.num_rows

    def finish(self, transaction: _Transaction) -> None:
        self._close(transaction)

    def pre_commit(self, transaction: _Transaction) -> list[DeltaDataFile]:
        self._close(transaction)
        return list(transaction.files)

    def abort(self, transaction: _Transaction) -> None:
        filesystem, root = self.filesystem()
        for file in transaction.opened.values():
            file.writer.close()
        paths = [f.relative for f in transaction.opened.values()]
        for relative in [*paths, *(f["path"] for f in transaction.files)]:
            delete_if_exists(filesystem, f"{root}/{relative}")
        transaction.opened.clear()

    def _resolve(self, transaction: _Transaction, schema: pa.Schema) -> None:
        """Take the table's schema and partitioning (or the stream's, for a new table);
        refuse a stream that does not fit, before any file is written."""
        table = self.table()
        if table is None:
            transaction.target = delta_typed(schema)
            transaction.partition_by = self.partition_by or []
            transaction.new_table = True
        else:
            transaction.target = pa.schema(table.schema().to_arrow())
            transaction.partition_by = list(table.metadata().partition_columns)
            self._check_fit(schema, table, SinkOutputError)
        self._check_partitioning(transaction.target, transaction.partition_by)

    def _open(self, transaction: _Transaction, folder: str, partition: dict[str, Any]) -> _OpenFile:
        filesystem, root = self.filesystem()
        assert transaction.target is not None
        name = f"{transaction.stem}-{len(transaction.files) + len(transaction.opened)}.parquet"
        relative = f"{folder}/{name}" if folder else name
        filesystem.create_dir(f"{root}/{folder}" if folder else root, recursive=True)
        data = pa.schema([f for f in transaction.target if f.name not in transaction.partition_by])
        writer = pq.ParquetWriter(f"{root}/{relative}", data, filesystem=filesystem)
        transaction.opened[folder] = _OpenFile(writer, relative, partition)
        return transaction.opened[folder]

    def _close(self, transaction: _Transaction) -> None:
        """Close the open files; record what the committer's ``add`` actions need."""
        filesystem, root = self.filesystem()
        for file in transaction.opened.values():
            file.writer.close()
            path = f"{root}/{file.relative}"
            committable: DeltaDataFile = {
                "path": file.relative,
                "size": filesystem.get_file_info(path).size,
                "rows": file.rows,
                "partition_values": file.partition,
                "stats": file_stats(path, filesystem, file.writer.schema),
                "modification_time": int(time.time() * 1000),
            }
            if transaction.new_table:  # the committer may have to create the table
                assert transaction.target is not None
                committable["schema"] = deltalake().Schema.from_arrow(transaction.target).to_json()
                committable["partition_by"] = transaction.partition_by
            transaction.files.append(committable)
        transaction.opened.clear()

    # ---- committer side ----

    def check_output(self, context: OutputCheckContext) -> None:
        """Before Spark starts: refuse a folder that holds files but no Delta table, a
        stream that does not fit the table (or its partitioning), naming the columns."""
        self._check_table(self.table(), f"job '{context.job_name}', sink '{context.sink_uid}'")

    def _check_table(self, table: Any, where: str) -> None:
        if table is None:
            foreign = [
                path for path, _ in list_data_files(*self.filesystem()) if not is_sink_file(path)
            ]
            if foreign:
                raise SinkOutputError(
                    f"{self.uri} is not a Delta table but holds files (e.g. {foreign[0]}): "
                    f"{where} will not make a table of it. Write to another path, or make it "
                    f"a Delta table first (deltalake.convert_to_deltalake)"
                )
            if self.input_schema is not None:
                self._check_partitioning(delta_typed(self.input_schema), self.partition_by or [])
            return
        if self.input_schema is not None:
            self._check_fit(self.input_schema, table, SinkOutputError, f" ({where})")
        self._check_partitioning(
            pa.schema(table.schema().to_arrow()), list(table.metadata().partition_columns)
        )

    def prepare_output(self, context: CommitContext) -> None:
        """Refuse a new run the mode does not allow (and, again, a stream that does not fit
        the table as it is now: ``check_output`` ran before Spark started, and the table
        loaded then is only brought up to date); an overwrite notes the run's first
        checkpoint (its commit replaces the table's rows)."""
        table = self.table()
        where = f"job '{context.job_name}', sink '{context.sink_uid}'"
        self._check_table(table, where)
        files = table.file_uris() if table is not None and self.mode == "error" else []
        if files:
            raise SinkOutputError(
                f"the Delta table {self.uri} already holds data (version "
                f"{table.version()}, {len(files)} files): {where} will not write "
                f"there with mode='error'. Use DeltaSink(..., mode='append') to add to it, "
                f"mode='overwrite' to replace its rows, or another table"
            )
        if self.mode == "overwrite":
            marker = {"overwrite_from": context.checkpoint_id, "run_id": context.run_id}
            context.storage.write_json_atomically(self._marker(context), marker)

    def commit(self, context: CommitContext, committables: list[DeltaDataFile]) -> None:
        app_id = self.app_id(context.job_id, context.sink_uid)
        table = self.table()
        done = table.transaction_version(app_id) if table is not None else None
        if done is not None and done >= context.checkpoint_id:
            self._remove_strays(context, committables)  # committed before a crash
            return
        filesystem, root = self.filesystem()
        for file in committables:  # check everything before publishing anything
            verify_file(filesystem, f"{root}/{file['path']}", file, stuck(context, self.uri))
        overwrite = self._overwrites(context, done)
        module = deltalake()
        actions = [
            module.transaction.AddAction(
                file["path"],  # as on disk: delta-rs escapes it in the log
                file["size"],
                file["partition_values"],
                file["modification_time"],
                True,
                stats_json(file["stats"]),
            )
            for file in committables
        ]
        properties = module.CommitProperties(
            app_transactions=[module.Transaction(app_id, context.checkpoint_id)],
            custom_metadata={
                "flintlock.job": context.job_name,
                "flintlock.run_id": context.run_id,
                "flintlock.checkpoint_id": str(context.checkpoint_id),
            },
        )
        if table is None:
            self._create(context, committables, actions, properties)
        elif actions or overwrite:  # an empty epoch adds no table version
            for file in committables:
                if "schema" in file:  # written while the table did not exist yet
                    schema = pa.schema(module.Schema.from_json(file["schema"]).to_arrow())
                    self._check_fit(schema, table, CommittableError, stuck(context, self.uri))
            table.create_write_transaction(
                actions,
                mode="overwrite" if overwrite else "append",
                schema=table.schema(),
                partition_by=list(table.metadata().partition_columns) or None,
                commit_properties=properties,
            )
        self._remove_strays(context, committables)

    def abort_uncommitted(self, context: CommitContext, keep: list[DeltaDataFile]) -> None:
        """Delete this job's data files of checkpoints after the last one in the table's
        log that ``keep`` does not name: no commit ever added them."""
        table = self.table()
        done = (
            table.transaction_version(self.app_id(context.job_id, context.sink_uid))
            if table
            else None
        )
        kept = {file["path"] for file in keep}
        for relative, checkpoint_id in self._own_files(context):
            if relative not in kept and (done is None or checkpoint_id > done):
                self._delete(relative)

    def _create(
        self,
        context: CommitContext,
        committables: list[DeltaDataFile],
        actions: list[Any],
        properties: Any,
    ) -> None:
        """Create the table with the checkpoint's files (or empty, from the stream's schema)."""
        module = deltalake()
        if committables:
            schema = module.Schema.from_json(committables[0]["schema"])
            partition_by = committables[0]["partition_by"]
        elif self.input_schema is not None:
            schema = module.Schema.from_arrow(delta_typed(self.input_schema))
            partition_by = self.partition_by or []
        else:
            return  # no rows and no known schema: nothing to create yet
        module.transaction.create_table_with_add_actions(
            self.uri,
            schema,
            actions,
            mode="error",
            partition_by=partition_by or None,
            storage_options=self.delta_options(),
            commit_properties=properties,
        )

    def _overwrites(self, context: CommitContext, done: int | None) -> bool:
        """True for the first commit of a run started with mode='overwrite'."""
        if self.mode != "overwrite" or not context.storage.exists(self._marker(context)):
            return False
        first = int(context.storage.read_json(self._marker(context))["overwrite_from"])
        return context.checkpoint_id >= first and (done is None or done < first)

    def _marker(self, context: CommitContext) -> str:
        return context.sink_notes("delta")

    def _remove_strays(self, context: CommitContext, committables: list[DeltaDataFile]) -> None:
        """Delete this job's files of the committed checkpoint that its commit did not add
        (failed task attempts, a dead run's): only the committed attempts are in the log."""
        committed = {file["path"] for file in committables}
        for relative, checkpoint_id in self._own_files(context):
            if checkpoint_id == context.checkpoint_id and relative not in committed:
                self._delete(relative)

    def _own_files(self, context: CommitContext) -> list[tuple[str, int]]:
        """This sink's data files of this job in the table's folder, with their checkpoints."""
        prefix = file_prefix(context.job_id, context.sink_uid)
        found = []
        for relative, base_name in list_data_files(*self.filesystem()):
            checkpoint_id = checkpoint_of(base_name, prefix)
            if checkpoint_id is not None:
                found.append((relative, checkpoint_id))
        return found

    def _delete(self, relative: str) -> None:
        filesystem, root = self.filesystem()
        delete_if_exists(filesystem, f"{root}/{relative}")

    # ---- checks ----

    def _check_fit(
        self, schema: pa.Schema, table: Any, error: type[Exception], suffix: str = ""
    ) -> None:
        """Refuse (``error``) a stream whose columns do not fit the table, naming them."""
        differences = schema_differences(schema, pa.schema(table.schema().to_arrow()))
        if differences:
            raise error(
                f"the stream does not fit the Delta table {self.uri} (version "
                f"{table.version()}): {'; '.join(differences)}. Change the stream's columns "
                f"(e.g. a map with output_schema=...) or write to another table{suffix}"
            )

    def _check_partitioning(self, schema: pa.Schema, partition_by: list[str]) -> None:
        if self.partition_by is not None and self.partition_by != partition_by:
            raise SinkOutputError(
                f"the Delta table {self.uri} is partitioned by {partition_by}, the sink by "
                f"{self.partition_by}: pass partition_by={partition_by} (or None)"
            )
        missing = [name for name in partition_by if name not in schema.names]
        if missing:
            raise SinkOutputError(
                f"DeltaSink {self.uri}: partition columns {missing} are not columns of the "
                f"stream ({', '.join(schema.names)})"
            )


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("delta", DeltaSink)
