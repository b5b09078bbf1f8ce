"""Transient storage errors, retried: an object store's ``INTERNAL_FAILURE``, ``SlowDown``
or HTTP 503 on one request must not end a driver or a task.

Every read and write of ``CheckpointStorage`` goes through ``retrying``: a transient error
is tried again a few times with a doubling pause; one that persists, and any other I/O
error (FileNotFoundError aside, which callers read as "missing"), becomes a StorageError
naming the file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from flintlock.core.errors import StorageError

T = TypeVar("T")

ATTEMPTS = 6
"""Tries of one storage call before its transient error is kept: the only retries of
a whole-object read, write or delete on S3 (core/storage/whole_objects.py)."""
FIRST_PAUSE = 0.05
"""Seconds before the second try; each later pause doubles (0.05 ... 0.8: 1.55 s in all)."""

TRANSIENT_MARKERS = (
    # the AWS SDK's error kinds, as pyarrow's S3 file system words them
    "INTERNAL_FAILURE",
    "SERVICE_UNAVAILABLE",
    "SLOW_DOWN",
    "THROTTLING",
    "REQUEST_TIMEOUT",
    "NETWORK_CONNECTION",
    # the services' own error codes (S3, GCS and S3-compatible stores)
    "InternalError",
    "SlowDown",
    "ServiceUnavailable",
    "RequestTimeout",
    "Throttling",
    "HTTP status 500",
    "HTTP status 502",
    "HTTP status 503",
    "HTTP status 504",
)
"""Words in an OSError's text that mark a passing fault of the store, not of the file."""


def is_transient(error: BaseException) -> bool:
    """True for an I/O error worth another try: the store's passing fault (conservative:
    only the markers above; a missing file never is)."""
    if isinstance(error, FileNotFoundError) or not isinstance(error, OSError):
        return False
    text = str(error)
    return any(marker in text for marker in TRANSIENT_MARKERS)


def retrying(path: str, action: str, call: Callable[[], T], *, name_others: bool = True) -> T:
    """``call()``, tried again on a transient error (at most ``ATTEMPTS`` tries in all).

    ``action`` and ``path`` name what failed (``"read"``, ``"write"``...): a transient
    error that persists is a StorageError naming them, and so is another I/O error unless
    ``not name_others`` (a reader that tells a damaged file by it). A FileNotFoundError
    and errors that are not OSErrors pass unchanged."""
    pause = FIRST_PAUSE
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except FileNotFoundError:
            raise
        except StorageError:
            raise  # already named by an inner call
        except OSError as error:
            if not is_transient(error):
                if not name_others:
                    raise
                raise StorageError(f"cannot {action} {path}: {error}") from error
            if attempt == ATTEMPTS:
                raise StorageError(
                    f"cannot {action} {path}: the storage failed {ATTEMPTS} times in a row, "
                    f"the last time with: {error}"
                ) from error
        time.sleep(pause)
        pause *= 2
    raise AssertionError("unreachable: the last attempt returns or raises")


def tried_again(call: Callable[[], T]) -> T:
    """``call()``, tried again on a transient error (at most ``ATTEMPTS`` tries in all),
    the last error raised as it is: for idempotent calls that name their own files, a
    sink's commit (a passing fault of the store must not end the job)."""
    pause = FIRST_PAUSE
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except OSError as error:
            if attempt == ATTEMPTS or not is_transient(error):
                raise
        time.sleep(pause)
        pause *= 2
    raise AssertionError("unreachable: the last attempt returns or raises")
