"""FileSink: Parquet files written exactly once through two-phase commit.

Each subtask writes staging files under ``<path>/_staging-<job id>/`` (a name starting
with ``_``: Spark and pyarrow datasets skip it), named with run id, checkpoint, subtask
and Spark's task attempt id; the staging folder belongs to one job (checkpoint directory,
job name), and only that job ever deletes from it. Pre-commit closes the files and
records each one's size and row count; the commit, on the driver once the checkpoint
completed, checks every staged file against them and renames it to its final name —
idempotently: a file already at its final name is done. ``mode`` says what a new run may
do to a path that already holds data: ``error`` (the default) refuses, ``append`` adds,
``overwrite`` replaces it when the run's first checkpoint commits; which jobs wrote in
``path`` is recorded there (files_owners). On S3 no file is staged or renamed: each is a
multipart upload under its final name, completed at commit (files_s3).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, final

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flintlock import CommittableError, SinkOutputError, TwoPhaseCommitSink, hookimpl
from flintlock.plugin_api import OUTPUT_MODES, CommitContext, SinkWriterContext, list_folder
from flintlock.sinks import files_s3
from flintlock.sinks.files_owners import REGISTRY as REGISTRY
from flintlock.sinks.files_owners import (
    data_files,
    exists,
    other_pending_jobs,
    register,
    writers_of,
)
from flintlock.sinks.files_s3 import MultipartUpload, S3Files, UploadedParquetFile

if TYPE_CHECKING:
    from flintlock.plugin_api import OutputCheckContext


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class _FileNames(TypedDict):
    staging: str
    final: str


@final
class StagedParquetFile(_FileNames, total=False):
    """A FileSink committable: a staged file, its final name, and what verifies it (rows
    and bytes, absent in committables of checkpoints written before they were recorded)."""

    rows: int
    bytes: int


@dataclass
class _Transaction:
    staging_dir: str
    stem: str
    final_stem: str
    files: list[Any] = field(default_factory=list)
    writer: pq.ParquetWriter | None = None
    rows_in_file: int = 0
    upload: MultipartUpload | None = None


ParquetFileCommittable = StagedParquetFile | UploadedParquetFile


class FileSink(TwoPhaseCommitSink[_Transaction, ParquetFileCommittable]):
    """Writes Parquet files to ``path`` (a local path or any pyarrow file system URI).

    ``mode``: ``"error"`` (default) refuses a new run if ``path`` already holds data or
    another job's pending files; ``"append"`` adds to it; ``"overwrite"`` replaces its
    data files when the run commits. A start that completes a pending commit, or returns
    a finished run's result, is not a new run and writes nothing new. ``rows_per_file``
    caps each file's rows (a larger batch is split across files); None: one file per
    checkpoint and subtask. ``part_size``: on S3, the bytes of each part of a file's
    multipart upload (5 MiB at least, S3's minimum).
    """

    name = "files"
    commits_beside_next_epoch = True  # a commit publishes staged files, tasks stage new ones

    def __init__(
        self,
        path: str,
        rows_per_file: int | None = None,
        mode: str = "error",
        part_size: int = files_s3.DEFAULT_PART_SIZE,
    ) -> None:
        if rows_per_file is not None and not _is_positive_int(rows_per_file):
            raise SinkOutputError(
                f"FileSink rows_per_file must be a positive int or None, got {rows_per_file!r}"
            )
        if mode not in OUTPUT_MODES:
            raise SinkOutputError(f"FileSink mode {mode!r} is not one of {', '.join(OUTPUT_MODES)}")
        files_s3.check_part_size(part_size)
        self.path = path
        self.rows_per_file = rows_per_file
        self.mode = mode
        self.part_size = part_size

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        """The file system and base path of ``path``."""
        if "://" in self.path:
            filesystem, base = self.job_storage_options.filesystem(self.path)
            return filesystem, base.rstrip("/")
        return pafs.LocalFileSystem(), os.path.abspath(self.path).rstrip("/")

    def _staging_dir(self, base: str, job_id: str) -> str:
        return f"{base}/_staging-{job_id or 'local'}"

    # ---- writer side ----

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> _Transaction:
        task = context.task
        _, base = self.filesystem()
        stem = f"{task.run_id}-chk{checkpoint_id}-{task.subtask_index}-{task.attempt_id}"
        final_stem = f"part-{task.run_id}-chk{checkpoint_id}-{task.subtask_index}"
        return _Transaction(self._staging_dir(base, task.job_id), stem, final_stem)

    def write(self, transaction: _Transaction, batch: pa.RecordBatch) -> None:
        if transaction.writer is not None and transaction.writer.schema != batch.schema:
            raise ValueError(
                f"file sink '{self.path}': batch schema {batch.schema} differs from the "
                f"file's {transaction.writer.schema}"
            )
        if not self.rows_per_file:
            self._write_to_file(transaction, batch)
            return
        start = 0  # a batch larger than the room left is split: no file exceeds the limit
        while start < batch.num_rows:
            room = self.rows_per_file - transaction.rows_in_file
            self._write_to_file(transaction, batch.slice(start, room))
            start += room
            if transaction.rows_in_file >= self.rows_per_file:
                self._close_file(transaction)

    def _write_to_file(self, transaction: _Transaction, batch: pa.RecordBatch) -> None:
        if transaction.writer is None:
            self._open_file(transaction, batch.schema)
        assert transaction.writer is not None
        transaction.writer.write_batch(batch)
        transaction.rows_in_file += batch.num_rows

    def finish(self, transaction: _Transaction) -> None:
        self._close_file(transaction)  # the last rows reach the staging file now

    def pre_commit(self, transaction: _Transaction) -> list[ParquetFileCommittable]:
        self._close_file(transaction)
        return list(transaction.files)

    def abort(self, transaction: _Transaction) -> None:
        if transaction.upload is not None:  # dropped: its last part is never sent
            transaction.files[-1].update(transaction.upload.drop())
            transaction.writer = transaction.upload = None
        self._close_file(transaction)
        filesystem, _ = self.filesystem()
        for file in transaction.files:
            if "key" in file:
                S3Files(filesystem, self.path).abort(file)
            else:
                _delete_if_exists(filesystem, file["staging"])

    def _open_file(self, transaction: _Transaction, schema: pa.Schema) -> None:
        filesystem, base = self.filesystem()
        number = len(transaction.files)
        staging = f"{transaction.staging_dir}/{transaction.stem}-{number}.parquet"
        final = f"{base}/{transaction.final_stem}-{number}.parquet"
        s3_files = S3Files.of(filesystem, self.path)
        if s3_files is not None:  # written under its final name, visible once completed
            transaction.upload = s3_files.start(staging, final, self.part_size)
            transaction.writer = pq.ParquetWriter(transaction.upload, schema)
            transaction.files.append(transaction.upload.committable())
        else:
            filesystem.create_dir(transaction.staging_dir, recursive=True)
            transaction.writer = pq.ParquetWriter(staging, schema, filesystem=filesystem)
            transaction.files.append({"staging": staging, "final": final})
        transaction.rows_in_file = 0

    def _close_file(self, transaction: _Transaction) -> None:
        """Close the open file (on S3: upload its last part) and record its size and rows
        for the committer."""
        if transaction.writer is not None:
            transaction.writer.close()
            transaction.writer = None
            file = transaction.files[-1]
            file["rows"] = transaction.rows_in_file
            if transaction.upload is not None:
                file.update(transaction.upload.close())
                transaction.upload = None
            else:
                filesystem, _ = self.filesystem()
                file["bytes"] = filesystem.get_file_info(file["staging"]).size

    # ---- committer side ----

    def check_output(self, context: OutputCheckContext) -> None:
        """On S3, boto3 must be installed (before Spark starts, not in a task)."""
        S3Files.of(self.filesystem()[0], self.path)

    def prepare_output(self, context: CommitContext) -> None:
        """Refuse a new run the mode does not allow; claim the job's staging folder."""
        filesystem, base = self.filesystem()
        if self.mode == "error":
            data = data_files(filesystem, base)
            if data:
                raise SinkOutputError(
                    f"the output path {base} already holds data ({len(data)} files, e.g. "
                    f"{data[0]}{writers_of(filesystem, base, data)}): job "
                    f"'{context.job_name}' will not write there with mode='error'. Use "
                    f"FileSink(..., mode='append') to add to it, mode='overwrite' to "
                    f"replace it, or another path"
                )
            pending = other_pending_jobs(filesystem, base, context.job_id)
            if pending:
                raise SinkOutputError(
                    f"the output path {base} has pending files of another job, {pending[0]}: "
                    f"job '{context.job_name}' will not write there with mode='error' (use "
                    f"another path, or mode='append' to write beside it)"
                )
        if self.mode == "overwrite":  # due at the new run's first commit, only there
            notes = {"overwrite_from": context.checkpoint_id, "run_id": context.run_id}
            context.storage.write_json_atomically(context.sink_notes("files"), notes)
        self._register(filesystem, base, context)

    def commit(self, context: CommitContext, committables: list[ParquetFileCommittable]) -> None:
        filesystem, base = self.filesystem()
        with ThreadPoolExecutor(max_workers=8) as pool:  # check all before publishing any
            list(pool.map(lambda file: self.verify(filesystem, file, context), committables))
        overwrite = self._overwrite_due(context)
        if overwrite is not None:  # again after a crash: the run's own files stay
            mine = f"part-{context.run_id}-"
            for path in data_files(filesystem, base):
                if not os.path.basename(path).startswith(mine):
                    filesystem.delete_file(path)
        self._register(filesystem, base, context)
        for file in committables:
            self.commit_file(filesystem, file)
        uploads = [file for file in committables if "upload_id" in file]
        if uploads:  # all published: their markers go, in one request
            S3Files(filesystem, self.path).drop_markers(uploads)
        if overwrite is not None:
            done = overwrite | {"done_at": context.checkpoint_id}
            context.storage.write_json_atomically(context.sink_notes("files"), done)

    def _register(self, filesystem: pafs.FileSystem, base: str, context: CommitContext) -> None:
        """Record the job's run in ``path``'s owners, once per driver (it only grows)."""
        registered: set[tuple[str, ...]] = self.__dict__.setdefault("_registered", set())
        run = (base, context.job_id, context.run_id)
        if run not in registered:
            register(filesystem, base, context)
            registered.add(run)

    def _overwrite_due(self, context: CommitContext) -> dict[str, Any] | None:
        """The overwrite note if this commit replaces the path's data: the first commit
        since a new run began with mode='overwrite' (not a later run that continues it)."""
        path = context.sink_notes("files")
        if self.mode != "overwrite" or not context.storage.exists(path):
            return None
        notes = context.storage.read_json(path)
        due = "done_at" not in notes and context.checkpoint_id >= notes["overwrite_from"]
        return notes if due else None

    def verify(
        self, filesystem: pafs.FileSystem, file: ParquetFileCommittable, context: CommitContext
    ) -> None:
        """Check a committable's file (staged, or already published) is the one written."""
        if "upload_id" in file:
            return S3Files(filesystem, self.path).verify(file, _stuck(context))
        for path in (file["staging"], file["final"]):
            info = filesystem.get_file_info(path)
            if info.type != pafs.FileType.File:
                continue
            if "bytes" in file and info.size != file["bytes"]:
                raise CommittableError(
                    f"the file {path} has {info.size} bytes, {file['bytes']} were written "
                    f"(truncated or changed){_stuck(context)}"
                )
            try:
                rows = pq.read_metadata(path, filesystem=filesystem).num_rows
            except (pa.ArrowInvalid, OSError) as error:
                raise CommittableError(
                    f"the file {path} is damaged: {error}{_stuck(context)}"
                ) from error
            if "rows" in file and rows != file["rows"]:
                raise CommittableError(
                    f"the file {path} holds {rows} rows, {file['rows']} were written"
                    f"{_stuck(context)}"
                )
            return
        raise CommittableError(
            f"the staged file {file['staging']} is missing and was never published as "
            f"{file['final']}: its rows are lost for good{_stuck(context)}"
        )

    def commit_file(self, filesystem: pafs.FileSystem, file: ParquetFileCommittable) -> None:
        """Rename one staging file to its final name; done already if only the final exists.
        On S3, complete its multipart upload; done already if the object is there."""
        if "upload_id" in file:
            S3Files(filesystem, self.path).complete(file)
        elif exists(filesystem, file["staging"]):
            filesystem.move(file["staging"], file["final"])
        elif not exists(filesystem, file["final"]):
            raise FileNotFoundError(
                f"neither the staging file {file['staging']} nor its final {file['final']} exists"
            )

    def abort_uncommitted(self, context: CommitContext, keep: list[ParquetFileCommittable]) -> None:
        """Delete this job's staging files that no completed checkpoint references (and
        its staging folder once empty); on S3, abort their multipart uploads."""
        filesystem, base = self.filesystem()
        staging_dir = self._staging_dir(base, context.job_id)
        s3_files = S3Files.of(filesystem, self.path)
        if s3_files is not None:
            return s3_files.abort_unreferenced(staging_dir, keep)
        kept = {file["staging"] for file in keep}
        left = False
        for info in list_folder(filesystem, staging_dir):
            if info.type == pafs.FileType.File and info.path not in kept:
                filesystem.delete_file(info.path)
            else:
                left = True
        if not left and filesystem.get_file_info(staging_dir).type == pafs.FileType.Directory:
            filesystem.delete_dir(staging_dir)

    def committed_files(self) -> list[str]:
        """Final Parquet files in the sink's folder, sorted."""
        filesystem, base = self.filesystem()
        return sorted(
            info.path
            for info in list_folder(filesystem, base)
            if info.type == pafs.FileType.File and re.search(r"/part-[^/]*\.parquet$", info.path)
        )


def _stuck(context: CommitContext) -> str:
    """What the user can do when a checkpoint's data cannot be committed whole."""
    return (
        f". Checkpoint {context.checkpoint_id} of job '{context.job_name}' cannot be "
        f"committed whole and starting again will not change that. To recover, run the "
        f"job anew: execute('{context.job_name}', new_run=True) or `flintlock run --new-run`, "
        f"with FileSink(..., mode='overwrite') to replace what this checkpoint published "
        f"(files part-{context.run_id}-*)"
    )


def _delete_if_exists(filesystem: pafs.FileSystem, path: str) -> None:
    if exists(filesystem, path):
        filesystem.delete_file(path)


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("files", FileSink)
