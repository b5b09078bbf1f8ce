"""Errors about a job's identity, its checkpoints, its commits and its sinks' output."""

from __future__ import annotations

from flintlock.core.errors import FlintlockError


class JobIdentityError(FlintlockError):
    """A job name cannot be used, or a job folder belongs to another job."""


class CheckpointError(FlintlockError):
    """A checkpoint cannot complete or be read (missing acknowledgement, damaged metadata,
    another job's folder); the message names the checkpoint and the file."""


class StorageError(CheckpointError, OSError):
    """A read or write of checkpoint storage failed for good (a transient error retried
    until it persisted, or another I/O error); the message names the file. Also an
    OSError, so code that handles a failed write of its own file still does."""


class RestoreError(CheckpointError):
    """A job cannot be restored from a checkpoint or savepoint as asked (state of an
    operator it no longer has, another max parallelism); the message names what."""


class CommitError(FlintlockError):
    """A sink's commit failed; the job is not finished until it succeeds."""


class CommittableError(CommitError):
    """A committable does not match what was staged (a file truncated, missing or changed).

    Starting again cannot fix it: the message says what the user can do instead."""


class SinkOutputError(FlintlockError):
    """A sink's output may not be written by this run (its output mode refuses it)."""


class JobControlError(FlintlockError):
    """A savepoint, stop or status request could not be made or was not carried out."""


class JobLeaseError(FlintlockError):
    """Another driver runs the job: a start is refused while its lease is fresh (the
    message names the holder's run, host and pid)."""


class LeaseLostError(JobLeaseError):
    """The running driver lost its lease (taken over, deleted or not renewed in time): it
    stops before it completes a checkpoint, commits or writes the job's result."""


class JobCanceled(FlintlockError):
    """The job was canceled on its driver (a second Ctrl-C or SIGTERM, or its Spark job
    canceled: the caller's job group or tag, Spark's UI); the result store records
    CANCELED and the next start continues from the last checkpoint."""

    by_signal = False
    """True if a stop signal canceled it (the message names the signal)."""
