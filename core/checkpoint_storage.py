"""Where snapshots go: Arrow IPC and JSON files on any ``pyarrow.fs`` file system."""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock.core.task_info import TaskInfo


def safe_name(name: str) -> str:
    """A file-name-safe form of an operator or vertex name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "_"


class CheckpointStorage:
    """Reads and writes snapshot files under ``base_path`` of a pyarrow file system."""

    def __init__(self, filesystem: pafs.FileSystem, base_path: str) -> None:
        self.filesystem = filesystem
        self.base_path = base_path.rstrip("/")

    @classmethod
    def from_uri(cls, uri: str) -> CheckpointStorage:
        """Storage for a URI or local path (``file:///...``, ``s3://...``, ``/tmp/chk``)."""
        filesystem, path = pafs.FileSystem.from_uri(uri)
        return cls(filesystem, path)

    def task_snapshot_dir(self, task: TaskInfo, checkpoint_id: int) -> str:
        """A directory unique to one attempt of one subtask's snapshot of a checkpoint."""
        return (
            f"{self.base_path}/{safe_name(task.job_name)}/{task.run_id}/chk-{checkpoint_id}/"
            f"{safe_name(task.task_name)}/{task.subtask_index}-{task.attempt_id}"
        )

    def write_table(self, path: str, table: pa.Table) -> int:
        """Write ``table`` as one Arrow IPC file; returns its size in bytes."""
        self._make_parent(path)
        with self.filesystem.open_output_stream(path) as sink:
            with pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            return sink.tell()

    def read_table(self, path: str) -> pa.Table:
        """Read an Arrow IPC file written by ``write_table``."""
        with self.filesystem.open_input_file(path) as source:
            return pa.ipc.open_file(source).read_all()

    def write_json(self, path: str, document: Any) -> int:
        """Write a JSON document; returns its size in bytes."""
        data = json.dumps(document, sort_keys=True, indent=1).encode()
        self._make_parent(path)
        with self.filesystem.open_output_stream(path) as sink:
            sink.write(data)
        return len(data)

    def read_json(self, path: str) -> Any:
        """Read a JSON document written by ``write_json``."""
        with self.filesystem.open_input_stream(path) as source:
            return json.loads(source.read())

    def _make_parent(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        self.filesystem.create_dir(parent, recursive=True)
