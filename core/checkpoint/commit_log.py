"""Which checkpoints of a job were committed: a durable, append-only record.

``<job folder>/_commits/chk-<N>.json`` is written once the sinks committed checkpoint N,
apart from the checkpoint's own folder, so that losing a checkpoint's metadata never
hides that its output was published. A start reads the newest entry: if the newest
completed checkpoint is older than it, resuming would run (and commit) that epoch's
rows again, so the start is refused, naming the missing file (``check_resumable``).
Entries are never rewritten; the oldest are dropped beyond ``KEPT_ENTRIES``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import pyarrow.fs as pafs

from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import list_folder
from flintlock.core.errors import CheckpointError

ENTRY = re.compile(r"chk-(\d+)\.json")
KEPT_ENTRIES = 100
"""Newest entries kept: the newest one decides; older ones are history."""


@dataclass(frozen=True)
class CommitRecord:
    """One entry: checkpoint N of run R was committed."""

    checkpoint_id: int
    run_id: str
    path: str


class CommitLog:
    """The commit record of one job folder."""

    def __init__(self, folder: JobFolder) -> None:
        self.folder = folder
        self.storage = folder.storage
        self.directory = folder.commits
        self._ids: list[int] | None = None

    def path_of(self, checkpoint_id: int) -> str:
        return self.folder.commit_record(checkpoint_id)

    def forget(self) -> None:
        """List the record again at the next look (another driver may have added to it)."""
        self._ids = None

    def committed_ids(self) -> list[int]:
        """Every recorded checkpoint id, ascending (listed once, then kept up to date)."""
        if self._ids is None:
            ids = []
            for info in list_folder(self.storage.filesystem, self.directory):
                match = ENTRY.fullmatch(info.base_name)
                if match is not None and info.type == pafs.FileType.File:
                    ids.append(int(match.group(1)))
                elif not info.base_name.endswith(".inprogress"):
                    raise CheckpointError(
                        f"{info.path} does not belong in the commit record of job "
                        f"'{self.folder.job_name}' (only chk-<id>.json files do)"
                    )
            self._ids = sorted(ids)
        return list(self._ids)

    def last(self) -> CommitRecord | None:
        """The newest entry, read and checked; a damaged one is an error naming it."""
        ids = self.committed_ids()
        if not ids:
            return None
        path = self.path_of(ids[-1])
        document = self.storage.read_json(path)
        try:
            if document["job_id"] != self.folder.job_id or document["checkpoint_id"] != ids[-1]:
                raise ValueError(
                    f"it names checkpoint {document['checkpoint_id']} of job id "
                    f"{document['job_id']}"
                )
            return CommitRecord(ids[-1], str(document["run_id"]), path)
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"the commit record {path} is damaged: {error}") from error

    def contains(self, checkpoint_id: int) -> bool:
        return checkpoint_id in self.committed_ids()

    def record(self, checkpoint_id: int, run_id: str) -> None:
        """Append: checkpoint ``checkpoint_id`` was committed. An entry is created once and
        never rewritten: a second driver that committed the same checkpoint (its commits
        are idempotent) finds it there."""
        ids = self.committed_ids()
        if checkpoint_id in ids:
            return
        document = {
            "job_name": self.folder.job_name,
            "job_id": self.folder.job_id,
            "checkpoint_id": checkpoint_id,
            "run_id": run_id,
            "committed": time.time(),
            "lease_generation": self.folder.generation,
        }
        self.storage.create_json_once(self.path_of(checkpoint_id), document)
        self._ids = sorted([*ids, checkpoint_id])
        for old in self._ids[:-KEPT_ENTRIES]:
            self.storage.delete_file(self.path_of(old))
        self._ids = self._ids[-KEPT_ENTRIES:]

    def check_resumable(self, latest_id: int | None, what: str) -> None:
        """Refuse to resume from checkpoint ``latest_id`` (None: from the start) when a
        later checkpoint was committed: its epochs would run and commit again."""
        last = self.last()
        if last is None or (latest_id is not None and latest_id >= last.checkpoint_id):
            return
        missing = self.folder.checkpoint_file(last.checkpoint_id, "_metadata.json")
        start = f"checkpoint {latest_id}" if latest_id is not None else "the beginning"
        raise CheckpointError(
            f"job '{self.folder.job_name}': checkpoint {last.checkpoint_id} was committed "
            f"({last.path}), but its metadata {missing} is missing, so {what} would resume "
            f"from {start} and commit the rows of the epochs after it a second time. "
            f"Restore that file, or run the job anew (new_run=True, `flintlock run "
            f"--new-run`) with output modes that say what happens to the committed output"
        )
