"""Where a savepoint goes: a new, self-contained folder under the savepoint directory;
and a completed epoch's snapshots moved into one (a stop asked while the epoch ran).

A savepoint belongs to the user and may be moved or copied whole, so it gets its own
folder rather than the job's ``chk-<N>``, and tasks write it through the job's checkpoint
storage: the savepoint directory must be on that file system."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from flintlock.core.checkpoint.snapshots import TaskAcknowledgement
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import CheckpointError

if TYPE_CHECKING:
    from flintlock.core.plan.execution import ExecutionPlan

EpochEndSavepoint = Callable[
    ["ExecutionPlan", list[TaskAcknowledgement]], tuple[list[TaskAcknowledgement], str | None]
]
"""An epoch's acknowledgements -> them as its checkpoint completes, and the savepoint
folder they lie in (None: a checkpoint)."""


def as_planned(
    plan: ExecutionPlan, acknowledgements: list[TaskAcknowledgement]
) -> tuple[list[TaskAcknowledgement], str | None]:
    """The epoch's snapshots where its plan had them written (no stop came meanwhile)."""
    return acknowledgements, plan.snapshot_root


def new_savepoint_root(storage: CheckpointStorage, savepoint_dir: str, checkpoint_id: int) -> str:
    """``<savepoint_dir>/savepoint-<N>-<6 hex>``, a folder not yet there, on ``storage``.

    Tasks write the savepoint through the job's checkpoint storage, so ``savepoint_dir``
    (a local path, relative ones too, or a ``pyarrow.fs`` URI) must be on its file system."""
    location = savepoint_dir if "://" in savepoint_dir else os.path.abspath(savepoint_dir)
    try:
        filesystem, base = storage.options.filesystem(location)
    except (ValueError, OSError) as error:
        raise CheckpointError(
            f"the savepoint directory {savepoint_dir!r} is not usable: {error}"
        ) from error
    theirs, ours = type(filesystem).__name__, type(storage.filesystem).__name__
    if theirs != ours:
        raise CheckpointError(
            f"the savepoint directory {savepoint_dir} is on a {theirs}, the job's checkpoint "
            f"storage {storage.base_path} on a {ours}: tasks write savepoints through the "
            f"checkpoint storage, so give a savepoint directory on the same file system"
        )
    return free_savepoint_root(storage, base, checkpoint_id)


def free_savepoint_root(storage: CheckpointStorage, folder: str, checkpoint_id: int) -> str:
    """``<folder>/savepoint-<N>-<6 hex>``, a folder not yet there; ``folder`` is a path
    on ``storage``'s file system (the job folder's ``savepoints``), never re-parsed."""
    for _ in range(8):
        root = f"{folder.rstrip('/')}/savepoint-{checkpoint_id}-{secrets.token_hex(3)}"
        if storage.filesystem.get_file_info(root).type == pafs.FileType.NotFound:
            return root
    raise CheckpointError(f"no new savepoint folder name is free under {folder}")


def snapshots_moved_to(
    storage: CheckpointStorage, acknowledgements: list[TaskAcknowledgement], root: str
) -> list[TaskAcknowledgement]:
    """Copy each acknowledged subtask snapshot's folder into the savepoint folder ``root``
    (the layout tasks write a savepoint in) and return the acknowledgements naming the
    copies; the originals are removed. A manifest records its files relative to its
    folder, so a copied folder reads as it is."""
    moved = []
    for ack in acknowledgements:
        manifest = ack.manifest_path
        folder = manifest.rsplit("/", 1)[0]
        task_folder, attempt = folder.rsplit("/", 1)
        target = f"{root.rstrip('/')}/{task_folder.rsplit('/', 1)[1]}/{attempt}"
        storage.filesystem.create_dir(target, recursive=True)
        pafs.copy_files(
            folder,
            target,
            source_filesystem=storage.filesystem,
            destination_filesystem=storage.filesystem,
        )
        moved.append(replace(ack, manifest_path=f"{target}/{manifest.rsplit('/', 1)[1]}"))
    for ack in acknowledgements:
        with contextlib.suppress(Exception):  # only space: nothing names them any more
            storage.delete_dir(ack.manifest_path.rsplit("/", 1)[0])
    return moved


def discard_savepoint_metadata(storage: CheckpointStorage, path: str, error: Exception) -> None:
    """Remove a savepoint's own metadata whose checkpoint failed to complete (no savepoint
    of a checkpoint that failed); if it cannot go, ``error`` says so in a note."""
    try:
        storage.delete_file(path)
    except OSError as cleanup:
        if hasattr(error, "add_note"):  # Python 3.11+; 3.10 keeps the error as is
            error.add_note(f"{path} could not be removed: {cleanup}")
