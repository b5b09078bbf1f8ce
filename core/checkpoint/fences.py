"""Checkpoints published once, and fences: why a driver that lost its lease publishes nothing.

A checkpoint is completed by creating its ``chk-<N>/_metadata.json`` once (with the
driver's lease generation): of two drivers that publish N, one fails, whatever the
timing. A driver that takes the lease over from one that did not release it first
creates a fence as the next id's metadata, before it restores or cleans up anything:
the old holder's next checkpoint is the id after the highest it saw, never above the
highest id now, so that fenced id makes its publish fail, and nothing a later publish
would have needed is removed from under it. Fences are kept for good; readers take a
fence for "nothing completed here".

``FLINTLOCK_PAUSE_AT=<point>:<job name>:<checkpoint id>`` is where a test pauses a real
driver, as a long GC or a frozen VM would (``pause_point``): the first time the driver
reaches that point for that job at that checkpoint or a later one, it creates the file
``FLINTLOCK_PAUSE_MARKER`` names and stops itself (SIGSTOP) until it gets SIGCONT. The
fencing tests pause a driver between its lease check and its publish this way.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.errors import CheckpointError, LeaseLostError

FENCED = "fenced"
"""The kind of a ``chk-<N>`` metadata that is a fence, not a checkpoint."""
FENCES_TRIED = 100
CHECKPOINT_FOLDER = re.compile(r"chk-(\d+)")


def is_fence(document: object) -> bool:
    """Whether a ``chk-<N>`` metadata document is a fence (no checkpoint completed as N)."""
    return isinstance(document, dict) and document.get("kind") == FENCED


def highest_folder_id(entries: list[pafs.FileInfo]) -> int:
    """The highest N of the ``chk-<N>`` entries of a checkpoints folder (0 if none)."""
    ids = [0]
    for info in entries:
        match = CHECKPOINT_FOLDER.fullmatch(info.base_name)
        if match is not None:
            ids.append(int(match.group(1)))
    return max(ids)


def publish_once(
    folder: JobFolder, path: str, document: dict[str, Any], what: str, checkpoint_id: int
) -> None:
    """Complete checkpoint ``checkpoint_id`` (``what``: "checkpoint 3", "savepoint 4"):
    create its metadata once, with the lease generation.

    The create is the guarantee, the lease check before it only an early stop: a driver
    paused between the two finds the id taken (by the driver that took its lease over,
    or by its fence) and stops before it commits anything."""
    generation = folder.generation
    folder.fence(f"completes the {what}")
    pause_point("publish-checkpoint", folder.job_name, checkpoint_id)
    document = {**document, "lease_generation": generation}
    try:
        created = folder.storage.create_json_once(path, document)
    except OSError as error:
        raise CheckpointError(
            f"job '{folder.job_name}': the {what} cannot be written to {path}: {error}"
        ) from error
    if created:
        return
    if not folder.storage.exists(path):
        raise CheckpointError(
            f"job '{folder.job_name}': the {what} cannot be written to {path}: something "
            f"that is not a file is there"
        )
    try:
        theirs = folder.storage.read_json(path)
    except CheckpointError:
        theirs = {}
    if not isinstance(theirs, dict):
        theirs = {}
    ours = theirs.get("run_id") == document["run_id"] and not is_fence(theirs)
    if ours and theirs.get("lease_generation") == generation:
        return  # our own write, answered late (a retried request)
    done = "fenced" if is_fence(theirs) else "completed"
    raise LeaseLostError(
        f"job '{folder.job_name}': checkpoint {checkpoint_id} was already {done} by run "
        f"{theirs.get('run_id')} (lease generation {theirs.get('lease_generation')}; {path}): "
        f"this driver (run {document['run_id']}, lease generation {generation}) lost the "
        f"job and stops before it commits anything; the next start continues from the "
        f"job's latest checkpoint"
    )


def fence_next(
    folder: JobFolder,
    run_id: str,
    highest_id: Callable[[], int],
    metadata_path: Callable[[int], str],
) -> int:
    """Create a fence as the metadata of the id after ``highest_id()``; returns that id.
    An id completed meanwhile (by the old holder) moves the fence up."""
    for _ in range(FENCES_TRIED):
        fence_id = highest_id() + 1
        document = {
            "job_name": folder.job_name,
            "job_id": folder.job_id,
            "checkpoint_id": fence_id,
            "kind": FENCED,
            "run_id": run_id,
            "lease_generation": folder.generation,
            "time": time.time(),
        }
        if folder.storage.create_json_once(metadata_path(fence_id), document):
            return fence_id
    raise CheckpointError(
        f"job '{folder.job_name}': {FENCES_TRIED} checkpoint ids were completed by another "
        f"driver while this one tried to fence the next one"
    )


PAUSE_AT = "FLINTLOCK_PAUSE_AT"
PAUSE_MARKER = "FLINTLOCK_PAUSE_MARKER"
_paused: set[str] = set()


def pause_point(point: str, job_name: str, checkpoint_id: int) -> None:
    """Stop this process here if the environment asks for ``point`` of ``job_name`` at
    ``checkpoint_id`` or before it (once per process)."""
    wanted = os.environ.get(PAUSE_AT)
    if wanted is None or wanted in _paused:
        return
    where, _, at = wanted.rpartition(":")
    if where != f"{point}:{job_name}" or not at.isdigit() or checkpoint_id < int(at):
        return
    _paused.add(wanted)
    marker = os.environ.get(PAUSE_MARKER)
    if marker:
        with open(marker, "w") as file:
            file.write(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)
