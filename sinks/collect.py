"""The collect sink: a 2PC sink whose commit hands the rows to the driver's execute().

Writers stage Arrow IPC files in the job's folder of checkpoint storage; committables
are their paths with size and row count. The commit (on the driver, once the checkpoint
completed) checks and reads them, keeps the rows as the job's result in
``<job folder>/results/`` (so a later start of the finished job returns them), and
deletes the staged files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock import TwoPhaseCommitSink, hookimpl
from flintlock.plugin_api import (
    CheckpointStorage,
    CommitContext,
    SinkWriterContext,
    list_folder,
    safe_name,
)
from flintlock.sinks.staged_files import read_staged


class StagedArrowFile(TypedDict):
    """A CollectSink committable: a staged Arrow IPC file and what verifies it."""

    path: str
    rows: int
    bytes: int


@dataclass
class _Staging:
    storage: CheckpointStorage
    path: str
    stream: Any = None
    writer: Any = None
    rows: int = 0
    closed: bool = False


class CollectSink(TwoPhaseCommitSink[_Staging, StagedArrowFile]):
    """Collects a stream into a pyarrow.Table, returned by ``execute()`` (exactly once)."""

    name = "collect"

    def __init__(self, name: str = "collect", schema: pa.Schema | None = None) -> None:
        self.name = name
        self.schema = schema
        """The stream's schema if known: the result of an input without rows has it."""
        self.result: pa.Table | None = None
        self.result_path: str | None = None

    def staging_dir(self, storage: CheckpointStorage, job_name: str) -> str:
        """Where this sink's writers stage files for job ``job_name``."""
        return f"{storage.job_dir(job_name)}/collect-staging/{safe_name(self.name)}"

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> _Staging:
        task = context.task
        path = (
            f"{self.staging_dir(context.storage, task.job_name)}/{task.run_id}-chk{checkpoint_id}"
            f"-{task.subtask_index}-{task.attempt_id}.arrow"
        )
        return _Staging(context.storage, path)

    def write(self, transaction: _Staging, batch: pa.RecordBatch) -> None:
        if transaction.writer is None:
            transaction.storage.filesystem.create_dir(
                transaction.path.rsplit("/", 1)[0], recursive=True
            )
            transaction.stream = transaction.storage.filesystem.open_output_stream(transaction.path)
            transaction.writer = pa.ipc.new_file(transaction.stream, batch.schema)
        transaction.writer.write_batch(batch)
        transaction.rows += batch.num_rows

    def pre_commit(self, transaction: _Staging) -> list[StagedArrowFile]:
        if transaction.writer is None:
            return []
        self._close(transaction)
        size = transaction.storage.filesystem.get_file_info(transaction.path).size
        return [{"path": transaction.path, "rows": transaction.rows, "bytes": size}]

    def abort(self, transaction: _Staging) -> None:
        if transaction.writer is not None:
            self._close(transaction)
            filesystem = transaction.storage.filesystem
            if filesystem.get_file_info(transaction.path).type == pafs.FileType.File:
                filesystem.delete_file(transaction.path)

    def _close(self, transaction: _Staging) -> None:
        if not transaction.closed:
            transaction.closed = True
            transaction.writer.close()
            transaction.stream.close()

    def commit(self, context: CommitContext, committables: list[StagedArrowFile]) -> None:
        storage = context.storage
        result_path = (
            f"{context.job_dir}/results/{safe_name(self.name)}-chk-{context.checkpoint_id}.arrow"
        )
        if storage.exists(result_path):  # committed before a crash: read it back
            self.result = storage.read_table(result_path)
        else:
            tables = [read_staged(storage, file, context) for file in committables]
            if tables:
                table = pa.concat_tables(tables, promote_options="permissive")
            else:
                table = self.schema.empty_table() if self.schema is not None else pa.table({})
            temporary = f"{result_path}.inprogress"
            storage.write_table(temporary, table)
            storage.filesystem.move(temporary, result_path)
            self.result = table  # what the file now holds: not read back
        self.result_path = result_path
        for file in committables:  # the result is safe: staged files are not needed again
            if storage.exists(file["path"]):
                storage.filesystem.delete_file(file["path"])

    def abort_uncommitted(self, context: CommitContext, keep: list[StagedArrowFile]) -> None:
        """Delete staged files of this sink and job that no completed checkpoint references."""
        storage = context.storage
        kept = {file["path"] for file in keep}
        for info in list_folder(storage.filesystem, self.staging_dir(storage, context.job_name)):
            if info.type == pafs.FileType.File and info.path not in kept:
                storage.filesystem.delete_file(info.path)


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("collect", CollectSink)
