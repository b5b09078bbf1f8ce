"""Where a savepoint goes: a new, self-contained folder under the savepoint directory."""

from __future__ import annotations

import os
import secrets

import pyarrow.fs as pafs

from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.job_errors import CheckpointError


def new_savepoint_root(storage: CheckpointStorage, savepoint_dir: str, checkpoint_id: int) -> str:
    """``<savepoint_dir>/savepoint-<N>-<6 hex>``, a folder not yet there, on ``storage``.

    Tasks write the savepoint through the job's checkpoint storage, so ``savepoint_dir``
    (a local path, relative ones too, or a ``pyarrow.fs`` URI) must be on its file system."""
    location = savepoint_dir if "://" in savepoint_dir else os.path.abspath(savepoint_dir)
    try:
        filesystem, base = pafs.FileSystem.from_uri(location)
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
