"""FileSink: Parquet files written exactly once through two-phase commit.

Each subtask writes staging files under ``<path>/_staging-<job>/`` (a name starting
with ``_``: Spark and pyarrow datasets skip it), named with run id, checkpoint, subtask
and Spark's task attempt id. Pre-commit closes them; the commit, on the driver once the
checkpoint completed, renames each to its final name — idempotently: a file already at
its final name is done. Every job start deletes staging files no checkpoint references.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flintlock.core.checkpoint_storage import CheckpointStorage, safe_name
from flintlock.core.plugin_manager import hookimpl
from flintlock.core.sink_api import CommitContext, SinkWriterContext, TwoPhaseCommitSink


@dataclass
class _Transaction:
    staging_dir: str
    stem: str
    final_stem: str
    files: list[dict[str, str]] = field(default_factory=list)
    writer: pq.ParquetWriter | None = None
    rows_in_file: int = 0


class FileSink(TwoPhaseCommitSink):
    """Writes Parquet files to ``path`` (a local path or any pyarrow file system URI)."""

    name = "files"

    def __init__(self, path: str, rows_per_file: int | None = None) -> None:
        self.path = path
        self.rows_per_file = rows_per_file

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        """The file system and base path of ``path``."""
        if "://" in self.path:
            filesystem, base = pafs.FileSystem.from_uri(self.path)
            return filesystem, base.rstrip("/")
        import os

        return pafs.LocalFileSystem(), os.path.abspath(self.path).rstrip("/")

    def _staging_dir(self, base: str, job_name: str) -> str:
        return f"{base}/_staging-{safe_name(job_name)}"

    # ---- writer side ----

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> _Transaction:
        task = context.task
        _, base = self.filesystem()
        stem = f"{task.run_id}-chk{checkpoint_id}-{task.subtask_index}-{task.attempt_id}"
        final_stem = f"part-{task.run_id}-chk{checkpoint_id}-{task.subtask_index}"
        return _Transaction(self._staging_dir(base, task.job_name), stem, final_stem)

    def write(self, transaction: _Transaction, batch: pa.RecordBatch) -> None:
        if transaction.writer is not None and transaction.writer.schema != batch.schema:
            raise ValueError(
                f"file sink '{self.path}': batch schema {batch.schema} differs from the "
                f"file's {transaction.writer.schema}"
            )
        if transaction.writer is None:
            self._open_file(transaction, batch.schema)
        assert transaction.writer is not None
        transaction.writer.write_batch(batch)
        transaction.rows_in_file += batch.num_rows
        if self.rows_per_file and transaction.rows_in_file >= self.rows_per_file:
            self._close_file(transaction)

    def finish(self, transaction: _Transaction) -> None:
        self._close_file(transaction)  # the last rows reach the staging file now

    def pre_commit(self, transaction: _Transaction) -> list[Any]:
        self._close_file(transaction)
        return list(transaction.files)

    def abort(self, transaction: _Transaction) -> None:
        self._close_file(transaction)
        filesystem, _ = self.filesystem()
        for file in transaction.files:
            _delete_if_exists(filesystem, file["staging"])

    def _open_file(self, transaction: _Transaction, schema: pa.Schema) -> None:
        filesystem, base = self.filesystem()
        number = len(transaction.files)
        staging = f"{transaction.staging_dir}/{transaction.stem}-{number}.parquet"
        final = f"{base}/{transaction.final_stem}-{number}.parquet"
        filesystem.create_dir(transaction.staging_dir, recursive=True)
        transaction.writer = pq.ParquetWriter(staging, schema, filesystem=filesystem)
        transaction.files.append({"staging": staging, "final": final})
        transaction.rows_in_file = 0

    def _close_file(self, transaction: _Transaction) -> None:
        if transaction.writer is not None:
            transaction.writer.close()
            transaction.writer = None

    # ---- committer side ----

    def commit(self, context: CommitContext, committables: list[Any]) -> None:
        filesystem, _ = self.filesystem()
        for file in committables:
            self.commit_file(filesystem, file)

    def commit_file(self, filesystem: pafs.FileSystem, file: dict[str, str]) -> None:
        """Rename one staging file to its final name; done already if only the final exists."""
        staging_there = _exists(filesystem, file["staging"])
        if not staging_there:
            if _exists(filesystem, file["final"]):
                return
            raise FileNotFoundError(
                f"neither the staging file {file['staging']} nor its final {file['final']} exists"
            )
        filesystem.move(file["staging"], file["final"])

    def abort_uncommitted(self, storage: CheckpointStorage, job_name: str, keep: list[Any]) -> None:
        filesystem, base = self.filesystem()
        staging_dir = self._staging_dir(base, job_name)
        kept = {file["staging"] for file in keep}
        selector = pafs.FileSelector(staging_dir, allow_not_found=True)
        for info in filesystem.get_file_info(selector):
            if info.type == pafs.FileType.File and info.path not in kept:
                filesystem.delete_file(info.path)

    def committed_files(self) -> list[str]:
        """Final Parquet files in the sink's folder, sorted."""
        filesystem, base = self.filesystem()
        selector = pafs.FileSelector(base, allow_not_found=True)
        return sorted(
            info.path
            for info in filesystem.get_file_info(selector)
            if info.type == pafs.FileType.File and re.search(r"/part-[^/]*\.parquet$", info.path)
        )


def _exists(filesystem: pafs.FileSystem, path: str) -> bool:
    return filesystem.get_file_info(path).type == pafs.FileType.File


def _delete_if_exists(filesystem: pafs.FileSystem, path: str) -> None:
    if _exists(filesystem, path):
        filesystem.delete_file(path)


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("files", FileSink)
