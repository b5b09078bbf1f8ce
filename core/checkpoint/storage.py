"""Where snapshots go: Arrow IPC and JSON files on any ``pyarrow.fs`` file system.

Tasks write their own snapshots, so checkpoint storage must be reachable from every
worker as well as the driver: any ``pyarrow.fs`` file system is (local, HDFS, S3, GCS).
Every read and write of a checkpoint goes through this one class, so retries and errors
that name the file are in one place (CONTRIBUTING.md, "Checkpoint format")."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock.core.checkpoint.retries import retrying
from flintlock.core.errors import CheckpointError, StorageError
from flintlock.core.storage.conditional import create_once, replace_if
from flintlock.core.storage.options import NO_OPTIONS, StorageOptions
from flintlock.core.storage.side_by_side import SideBySide
from flintlock.core.storage.whole_objects import (
    delete,
    delete_tree,
    get,
    is_object_store,
    put,
)
from flintlock.core.task_info import TaskInfo


def safe_name(name: str) -> str:
    """An injective, file-name-safe form of a job, vertex, operator or state name.

    Percent-encoding keeps ``A-Z a-z 0-9 _ . - ~`` and encodes every other byte (``%`` too),
    so two different names never share a file name: ``'a b'``, ``'a/b'`` and ``'a_b'`` become
    ``a%20b``, ``a%2Fb`` and ``a_b``. A leading dot is encoded (no ``.``, ``..`` or hidden
    files); the empty name becomes ``%``, which no other name produces.
    """
    if not name:
        return "%"
    encoded = quote(name, safe="")
    return "%2E" + encoded[1:] if encoded.startswith(".") else encoded


LISTING_TRIES = 20
"""Listings of a folder that changes while Arrow lists it, before the error is kept."""


def list_folder(
    filesystem: pafs.FileSystem, folder: str, *, recursive: bool = False
) -> list[pafs.FileInfo]:
    """What is in ``folder`` (nothing if there is no such folder).

    Arrow's listing raises FileNotFoundError when a folder it lists appears or vanishes
    meanwhile: another process's first file in it, or a removal (another job's staging
    folder, say). Such a listing is taken again; the folder is then there or not."""
    selector = pafs.FileSelector(folder, allow_not_found=True, recursive=recursive)
    for _ in range(LISTING_TRIES - 1):
        try:
            return retrying(folder, "list", lambda: filesystem.get_file_info(selector))
        except FileNotFoundError:
            continue  # the folder changed while listed: list it again
    return retrying(folder, "list", lambda: filesystem.get_file_info(selector))


MAX_SIZES_KEPT = 10_000
"""Sizes of written files ``CheckpointStorage`` keeps for ``written_size`` at most."""


class CheckpointStorage:
    """Reads and writes snapshot files under ``base_path`` of a pyarrow file system."""

    def __init__(
        self,
        filesystem: pafs.FileSystem,
        base_path: str,
        uri_prefix: str | None = None,
        options: StorageOptions = NO_OPTIONS,
    ) -> None:
        self.filesystem = filesystem
        self.options = options
        """The environment's ``storage_options`` this storage was opened with: other
        places on the same store (a savepoint folder) open with them too."""
        self.base_path = base_path.rstrip("/")
        local = isinstance(filesystem, pafs.LocalFileSystem)
        self.uri_prefix = (
            uri_prefix
            if uri_prefix is not None
            else ("" if local else f"{filesystem.type_name}://")
        )
        """What turns a path on this storage back into the URI it came from (``s3://``;
        nothing for a local path)."""
        self._side_by_side = SideBySide(retrying)
        self._sizes: dict[str, int] = {}
        """Sizes of the Arrow files this process wrote to an object store, until asked
        (``written_size``): a lookup per file is a request there."""

    @classmethod
    def from_uri(cls, uri: str, options: StorageOptions = NO_OPTIONS) -> CheckpointStorage:
        """Storage for a URI or local path (``file:///...``, ``s3://...``, ``/tmp/chk``),
        opened with the environment's ``storage_options``."""
        filesystem, path = options.filesystem(uri)
        return cls(filesystem, path, _uri_prefix(uri, path), options)

    def uri(self, path: str) -> str:
        """``path`` on this storage as a user passes it back (``s3://bucket/...``): what
        flintlock hands to users (savepoints, checkpoints) names its file system."""
        return f"{self.uri_prefix}{path}"

    def path_of(self, uri: str) -> str | None:
        """The path on this storage that ``uri`` names, if it names one as ``uri(...)``
        writes it (same scheme, no credentials or options: those would say otherwise)."""
        if not self.uri_prefix or not uri.startswith(self.uri_prefix) or "?" in uri:
            return None
        path = uri[len(self.uri_prefix) :]
        return None if "@" in path.split("/", 1)[0] else path

    def job_dir(self, job_name: str) -> str:
        """The folder of job ``job_name``: its identity, result, checkpoints and runs."""
        return f"{self.base_path}/{safe_name(job_name)}"

    def run_dir(self, job_name: str, run_id: str) -> str:
        """The folder of one run of a job: its subtasks' snapshots and scratch files."""
        return f"{self.job_dir(job_name)}/{run_id}"

    def run_checkpoint_dir(self, job_name: str, run_id: str, checkpoint_id: int) -> str:
        """Where a run's subtasks write their snapshots of ``checkpoint_id``."""
        return f"{self.run_dir(job_name, run_id)}/chk-{checkpoint_id}"

    def task_snapshot_dir(self, task: TaskInfo, checkpoint_id: int, root: str | None = None) -> str:
        """A directory unique to one attempt of one subtask's snapshot of a checkpoint.

        Under the run's folder, or under ``root`` when given (a savepoint's own folder,
        which then holds every file of the savepoint)."""
        where = (
            root.rstrip("/")
            if root
            else self.run_checkpoint_dir(task.job_name, task.run_id, checkpoint_id)
        )
        return f"{where}/{safe_name(task.task_name)}/{task.subtask_index}-{task.attempt_id}"

    def write_table(self, path: str, table: pa.Table) -> int:
        """Write ``table`` as one Arrow IPC file; returns its size in bytes."""
        return retrying(path, "write", lambda: self._write_ipc(path, table))

    def _write_ipc(self, path: str, table: pa.Table) -> int:
        if is_object_store(self.filesystem):  # one request (core/storage/whole_objects.py)
            buffer = pa.BufferOutputStream()
            with pa.ipc.new_file(buffer, table.schema) as writer:
                writer.write_table(table)
            data = buffer.getvalue()
            self._side_by_side.write(path, lambda: put(self.filesystem, path, data))
            self._remember_size(path, len(data))
            return len(data)
        self._make_parent(path)
        with self.filesystem.open_output_stream(path) as sink:
            with pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            return int(sink.tell())

    def _remember_size(self, path: str, size: int) -> None:
        if len(self._sizes) >= MAX_SIZES_KEPT:
            self._sizes.clear()
        self._sizes[path] = size

    def written_size(self, path: str) -> int | None:
        """The size of ``path`` if this process wrote it to an object store (told once)."""
        return self._sizes.pop(path, None)

    def read_table(self, path: str) -> pa.Table:
        """Read an Arrow IPC file written by ``write_table``; a damaged file names itself."""
        try:
            return retrying(path, "read", lambda: self._read_ipc(path), name_others=False)
        except FileNotFoundError as error:
            raise CheckpointError(f"the Arrow file {path} is missing") from error
        except StorageError:
            raise
        except (pa.ArrowInvalid, OSError) as error:
            raise CheckpointError(f"the Arrow file {path} is damaged: {error}") from error

    def read_schema(self, path: str) -> pa.Schema:
        """The schema of an Arrow IPC file (its footer only); a damaged file names itself."""
        try:
            return retrying(path, "read", lambda: self._read_footer(path), name_others=False)
        except FileNotFoundError as error:
            raise CheckpointError(f"the Arrow file {path} is missing") from error
        except StorageError:
            raise
        except (pa.ArrowInvalid, OSError) as error:
            raise CheckpointError(f"the Arrow file {path} is damaged: {error}") from error

    def _read_ipc(self, path: str) -> pa.Table:
        if is_object_store(self.filesystem):  # one request, not a lookup and a read
            return pa.ipc.open_file(pa.py_buffer(get(self.filesystem, path))).read_all()
        with self.filesystem.open_input_file(path) as source:
            return pa.ipc.open_file(source).read_all()

    def _read_footer(self, path: str) -> pa.Schema:
        with self.filesystem.open_input_file(path) as source:
            return pa.ipc.open_file(source).schema

    def write_json(self, path: str, document: object) -> int:
        """Write a JSON document; returns its size in bytes."""
        data = _json_bytes(document)
        retrying(path, "write", lambda: self._write_bytes(path, data))
        return len(data)

    def _write_bytes(self, path: str, data: bytes) -> None:
        self._make_parent(path)
        self._side_by_side.write(path, lambda: put(self.filesystem, path, data))

    def writes_side_by_side(self) -> contextlib.AbstractContextManager[None]:
        """Within the block, this thread's ``write_table`` and ``write_json`` to an object
        store go out side by side (each a request's round trip); all are written, or the
        first failure raised, when it ends. A no-op on other file systems."""
        if is_object_store(self.filesystem):
            return self._side_by_side.block()
        return contextlib.nullcontext()

    def output_stream(self, path: str) -> pa.NativeFile:
        """A stream to write ``path`` through, closed by ``close_output_stream``: on an
        object store a buffer, uploaded in one request when it closes."""
        if is_object_store(self.filesystem):
            return pa.BufferOutputStream()
        self._make_parent(path)
        return self.filesystem.open_output_stream(path)

    def close_output_stream(self, path: str, stream: pa.NativeFile, written: bool) -> None:
        """Close a stream of ``output_stream``; a buffer is uploaded only if ``written``."""
        if isinstance(stream, pa.BufferOutputStream):
            data = stream.getvalue()
            if written:
                retrying(path, "write", lambda: put(self.filesystem, path, data))
                self._remember_size(path, len(data))
            return
        stream.close()

    def write_bytes_atomically(self, path: str, data: bytes) -> None:
        """Write ``data`` so that readers see the old file or the whole new one (as
        ``write_json_atomically``)."""
        if is_object_store(self.filesystem):
            retrying(path, "write", lambda: put(self.filesystem, path, data))
            return
        temporary = f"{path}.{uuid.uuid4().hex[:8]}.inprogress"
        retrying(temporary, "write", lambda: self._write_bytes(temporary, data))
        retrying(path, "move a new version onto", lambda: self.filesystem.move(temporary, path))

    def write_json_atomically(self, path: str, document: object) -> int:
        """Write a JSON document so that readers see the old one or the whole new one.

        Written to a unique temporary name beside ``path``, then renamed over it (atomic on
        local and HDFS file systems). An object store's upload is atomic itself: one PUT,
        no copy of a temporary object."""
        if is_object_store(self.filesystem):
            return self.write_json(path, document)
        temporary = f"{path}.{uuid.uuid4().hex[:8]}.inprogress"
        size = self.write_json(temporary, document)
        retrying(path, "move a new version onto", lambda: self.filesystem.move(temporary, path))
        return size

    def create_json_once(self, path: str, document: object) -> bool:
        """Create ``path`` with ``document`` unless a file is there (then False, nothing
        written): readers see the whole document or none, and of two writers one fails."""
        data = _json_bytes(document)  # create_once makes a local parent; S3 has none
        # a create whose answer was lost finds its own file when tried again: callers
        # tell their own document (publish_once) or take the next generation (the lease)
        return retrying(path, "create", lambda: create_once(self.filesystem, path, data))

    def replace_json_if(
        self, path: str, document: object, may_replace: Callable[[object], bool]
    ) -> bool:
        """Replace ``path`` with ``document`` if ``may_replace(the document there)`` (None:
        none, or one that is not JSON) holds when it is written (``If-Match`` on S3, a
        lock locally: ``core/storage/conditional.py``); False if it did not."""
        data = _json_bytes(document)

        def check(current: bytes | None) -> bool:
            try:
                there = None if current is None else json.loads(current)
            except ValueError:
                there = None  # damaged: its holder writes it whole again
            return may_replace(there)

        return retrying(path, "replace", lambda: replace_if(self.filesystem, path, data, check))

    def read_json(self, path: str, *, if_there: bool = False) -> Any:
        """Read a JSON document written by ``write_json``; a damaged one names its file.
        ``if_there``: None if there is no file (one request on an object store, where
        ``exists`` and a read would take two)."""
        try:
            data = retrying(path, "read", lambda: self._read_bytes(path))
        except FileNotFoundError as error:
            if if_there:
                return None
            raise CheckpointError(f"the file {path} is missing") from error
        try:
            return json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CheckpointError(
                f"the file {path} is not valid JSON (truncated or damaged: {error})"
            ) from error

    def exists(self, path: str) -> bool:
        """True if a file is at ``path``."""
        info = retrying(path, "look up", lambda: self.filesystem.get_file_info(path))
        return bool(info.type == pafs.FileType.File)

    def delete_dir(self, path: str) -> None:
        """Remove a folder and everything in it, if it exists (two requests on S3)."""
        retrying(path, "delete", lambda: delete_tree(self.filesystem, path))

    def delete_file(self, path: str) -> None:
        """Remove a file if it is there (one request on S3)."""
        retrying(path, "delete", lambda: delete(self.filesystem, path))

    def _read_bytes(self, path: str) -> bytes:
        return get(self.filesystem, path)

    def _make_parent(self, path: str) -> None:
        if is_object_store(self.filesystem):
            return  # folders are key prefixes there: creating one costs requests, not files
        parent = path.rsplit("/", 1)[0]
        self.filesystem.create_dir(parent, recursive=True)


def _uri_prefix(uri: str, path: str) -> str:
    """What goes before ``path`` to name it as ``uri`` did, without the credentials or
    options a URI may carry: ``s3://`` (the bucket is in the path), ``hdfs://host:port``."""
    parts = urlsplit(uri)
    if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # a path (C: on Windows)
        return ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://" if path.startswith(host) else f"{parts.scheme}://{host}"


def _json_bytes(document: object) -> bytes:
    """A JSON document as flintlock writes it: sorted keys, one space of indent."""
    return json.dumps(document, sort_keys=True, indent=1).encode()
