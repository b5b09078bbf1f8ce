"""The IcebergSink's committer, on the driver: output modes, the idempotent commit of a
checkpoint's data files in one Iceberg transaction, and the removal of files no
completed checkpoint references.

A half of ``IcebergSink`` (its base class), apart from the writers that run in tasks. A
commit is idempotent because a driver that crashed after committing commits the same
checkpoint again at its next start: the sink's last checkpoint id recorded in the
table's snapshots says what is already in, and a commit that loses a race with another
writer is tried again on the reloaded table."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from flintlock import CommitError, FlintlockError, SinkOutputError
from flintlock.plugin_api import CommitContext, OutputCheckContext, StorageOptions, list_folder
from flintlock.sinks import iceberg_stats
from flintlock.sinks import iceberg_tables as tables
from flintlock.sinks.iceberg_stats import IcebergDataFile

COMMIT_ATTEMPTS = 5
"""Tries of one checkpoint's commit when another writer committed to the table first."""


class IcebergCommitter:
    """Committer half of ``IcebergSink`` (see there); needs its table helpers."""

    table: str
    identifier: tuple[str, str]
    catalog: tables.CatalogSpec
    schema: Any
    input_schema: Any
    mode: str
    partition_by: list[str]
    job_storage_options: StorageOptions

    if TYPE_CHECKING:  # provided by IcebergSink

        def resolve(self, table: Any) -> None: ...
        def job_folder(self, job_id: str, sink_uid: str) -> str: ...
        def filesystem(self) -> Any: ...
        def verify(self, file: IcebergDataFile, context: CommitContext) -> None: ...

    def catalog_with_storage(self) -> tables.CatalogSpec:
        """The catalog's name and properties, over the environment's ``storage_options``
        as pyiceberg's FileIO names them (the catalog's own properties win)."""
        name, properties = self.catalog
        return name, {**self.job_storage_options.for_pyiceberg(), **properties}

    def open_catalog(self) -> Any:
        """The catalog, opened once per driver (never pickled to tasks)."""
        catalog = getattr(self, "_catalog", None)
        if catalog is None:
            try:
                catalog = tables.load_catalog(
                    self.catalog_with_storage(), f"IcebergSink('{self.table}')"
                )
            except FlintlockError:
                raise
            except Exception as error:
                raise SinkOutputError(
                    f"IcebergSink cannot open {tables.describe(self.catalog)} for table "
                    f"{self.table}: {type(error).__name__}: {error}"
                ) from error
            self._catalog = catalog
        return catalog

    def load_table(self) -> Any:
        """The table as the catalog has it now."""
        return self.open_catalog().load_table(self.table)

    def committed_table(self) -> Any:
        """The table as this sink's last commit left it (its metadata updated in place by
        pyiceberg), else as the catalog has it now. A table changed by another writer
        since fails the next commit's compare-and-swap, which reloads it: loading it for
        every commit and abort would cost a catalog query and a metadata read each epoch."""
        kept = getattr(self, "_kept_table", None)
        return kept if kept is not None else self.load_table()

    def owner(self, context: CommitContext) -> str:
        """This sink of this job, as its commit records name it."""
        return f"{context.job_id or 'local'}/{context.sink_uid or 'sink'}"

    def check_output(self, context: OutputCheckContext) -> None:
        """Before Spark starts: the catalog opens; an existing table fits the stream's
        schema, a missing one can be created from it (read only: nothing is created)."""
        try:
            catalog = self.open_catalog()
            if catalog.table_exists(self.table):
                self._check_fit(catalog.load_table(self.table), context.job_name)
            else:
                self._creatable_schema(context.job_name)
        except FlintlockError:
            raise
        except Exception as error:
            raise SinkOutputError(
                f"IcebergSink cannot check table {self.table} in "
                f"{tables.describe(self.catalog)} for job '{context.job_name}': "
                f"{type(error).__name__}: {error}"
            ) from error

    def prepare_output(self, context: CommitContext) -> None:
        """Create what is missing; refuse a table the mode or the schema does not allow."""
        try:
            table = self._prepare(context)
        except FlintlockError:
            raise
        except Exception as error:
            raise SinkOutputError(
                f"IcebergSink cannot prepare table {self.table} in "
                f"{tables.describe(self.catalog)} for job '{context.job_name}': "
                f"{type(error).__name__}: {error}"
            ) from error
        if self.mode == "overwrite":  # the run's first commit replaces the table's rows
            context.storage.write_json_atomically(
                self._intent_file(context), {"overwrite_from": context.checkpoint_id}
            )
        self.resolve(table)

    def _prepare(self, context: CommitContext) -> Any:
        catalog = self.open_catalog()
        catalog.create_namespace_if_not_exists(self.identifier[0])
        if not catalog.table_exists(self.table):
            return self._create(catalog, context)
        table = catalog.load_table(self.table)
        snapshot = table.current_snapshot()
        rows = int(snapshot.summary.get("total-records", "0")) if snapshot is not None else 0
        if self.mode == "error" and rows:
            raise SinkOutputError(
                f"Iceberg table {self.table} already holds {rows} rows: job "
                f"'{context.job_name}' will not write there with mode='error'. Use "
                f"IcebergSink(..., mode='append') to add to it, mode='overwrite' to replace "
                f"its rows, or another table"
            )
        self._check_fit(table, context.job_name)
        return table

    def _check_fit(self, table: Any, job_name: str) -> None:
        """Refuse a stream (its schema, when known) that does not fit the table."""
        schema = self.stream_schema()
        if schema is not None:
            problems = tables.schema_misfit(schema, table.schema())
            if problems:
                raise SinkOutputError(
                    f"the stream's schema does not fit Iceberg table {self.table}: "
                    f"{'; '.join(problems)}; job '{job_name}' wrote nothing"
                )

    def stream_schema(self) -> Any:
        """The rows' schema: ``schema=``, else the stream's when the job knows it."""
        return self.schema if self.schema is not None else self.input_schema

    def _creatable_schema(self, job_name: str) -> Any:
        """The schema a missing table is created from; refused if unknown or if it lacks
        a partition column."""
        schema = self.stream_schema()
        if schema is None:
            raise SinkOutputError(
                f"Iceberg table {self.table} does not exist in {tables.describe(self.catalog)}"
                f" and the stream's schema is not known before it runs: pass schema= (a "
                f"pyarrow.Schema) to IcebergSink to create it, or create it first; job "
                f"'{job_name}' wrote nothing"
            )
        missing = [name for name in self.partition_by if name not in schema.names]
        if missing:
            raise SinkOutputError(
                f"IcebergSink('{self.table}'): partition_by names {', '.join(missing)}, not "
                f"columns of the schema ({', '.join(schema.names)})"
            )
        return schema

    def _create(self, catalog: Any, context: CommitContext) -> Any:
        schema = self._creatable_schema(context.job_name)
        table = catalog.create_table(self.table, schema=schema)
        if self.partition_by:
            with table.update_spec() as update:
                for name in self.partition_by:
                    update.add_identity(name)
            table = catalog.load_table(self.table)
        return table

    def commit(self, context: CommitContext, committables: list[IcebergDataFile]) -> None:
        """Add the checkpoint's files in one transaction recording this sink's checkpoint
        id, unless the table's snapshots already record it (or a later one)."""
        table = self.committed_table()
        self._kept_table = None  # kept again once this commit went through
        owner = self.owner(context)
        expressions = tables.pyiceberg("pyiceberg.expressions")
        failed = tables.pyiceberg("pyiceberg.exceptions").CommitFailedException
        for attempt in range(COMMIT_ATTEMPTS):
            last = tables.last_commit(table, owner)
            if last is not None and last["checkpoint_id"] >= context.checkpoint_id:
                self._kept_table = table
                break  # committed before a crash: nothing to add
            overwrite = self._overwrite_due(context, last)
            if not committables and not overwrite:
                self._kept_table = table
                break
            if attempt == 0:
                for file in committables:  # check everything before publishing anything
                    self.verify(file, context)
            summary = {
                tables.JOB_ID: owner,
                tables.CHECKPOINT_ID: str(context.checkpoint_id),
                tables.RUN_ID: context.run_id,
                tables.JOB_NAME: context.job_name,
            }
            transaction = table.transaction()
            if overwrite and _holds_files(table):
                transaction.delete(expressions.AlwaysTrue(), snapshot_properties=summary)
            if committables:
                # the commit record, not a scan of every manifest, keeps files unique; the
                # writers' statistics spare reading each file's footer again
                iceberg_stats.append_files(transaction, table, committables, summary)
            try:
                transaction.commit_transaction()
                self._kept_table = table
                break
            except failed:
                table = self.load_table()  # another writer committed first: try again
        else:
            raise CommitError(
                f"Iceberg table {self.table} kept changing under checkpoint "
                f"{context.checkpoint_id} of job '{context.job_name}' ({COMMIT_ATTEMPTS} "
                f"tries); start the job again to complete the commit"
            )
        self._remove_files(context, context.checkpoint_id, committables)

    def _overwrite_due(self, context: CommitContext, last: dict[str, Any] | None) -> bool:
        """True if this commit is the first since a new run asked to overwrite."""
        if self.mode != "overwrite" or not context.storage.exists(self._intent_file(context)):
            return False
        start = int(context.storage.read_json(self._intent_file(context))["overwrite_from"])
        return context.checkpoint_id >= start and (last is None or last["checkpoint_id"] < start)

    def _intent_file(self, context: CommitContext) -> str:
        return context.sink_notes("iceberg")

    def abort_uncommitted(self, context: CommitContext, keep: list[IcebergDataFile]) -> None:
        """Delete the data files of this job's checkpoints newer than its last commit to
        the table that ``keep`` (pending checkpoints) does not reference."""
        kept = getattr(self, "_kept_table", None)
        if kept is None and not self.open_catalog().table_exists(self.table):
            return  # nothing written yet
        table = self.committed_table()
        self.resolve(table)
        last = tables.last_commit(table, self.owner(context))
        newest = last["checkpoint_id"] if last is not None else -1
        filesystem, to_path = self.filesystem()
        base = to_path(self.job_folder(context.job_id, context.sink_uid))
        for info in list_folder(filesystem, base):
            found = re.fullmatch(r"chk-(\d+)", info.base_name)
            if found and info.type == pafs.FileType.Directory and int(found[1]) > newest:
                self._remove_files(context, int(found[1]), keep)

    def _remove_files(
        self, context: CommitContext, checkpoint_id: int, keep: list[IcebergDataFile]
    ) -> None:
        """Delete the files of a checkpoint's folder that ``keep`` does not list (failed
        or lost attempts), and the folder once empty."""
        filesystem, to_path = self.filesystem()
        folder = (
            to_path(self.job_folder(context.job_id, context.sink_uid)) + f"/chk-{checkpoint_id}"
        )
        kept = {to_path(file["path"]) for file in keep}
        left = False
        for info in list_folder(filesystem, folder):
            if info.type == pafs.FileType.File and info.path not in kept:
                filesystem.delete_file(info.path)
            else:
                left = True
        if not left and filesystem.get_file_info(folder).type == pafs.FileType.Directory:
            filesystem.delete_dir(folder)


def _holds_files(table: Any) -> bool:
    """True if the table's current snapshot has data files (something to overwrite)."""
    snapshot = table.current_snapshot()
    return snapshot is not None and int(snapshot.summary.get("total-data-files", "1")) > 0
