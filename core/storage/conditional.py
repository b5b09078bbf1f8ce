"""Conditional writes, the two that fencing rests on: create once, and replace if.

A lease generation, a checkpoint's metadata and a commit record are each created once;
a second writer of the same name fails instead of overwriting, whatever the timing. On a
local or mounted file system the whole file is written under a unique name and then
hard-linked to its name (``link`` fails if the name exists, atomically, and readers
never see a partial file); on S3 it is a ``PutObject`` with ``If-None-Match: *``.

The job's result and status are replaced, but only by a writer whose check of what is
there still holds when it writes (a newer lease generation's document is never
overwritten): on S3 a ``PutObject`` with ``If-Match`` the ETag it checked; on a local or
mounted file system under an exclusive ``flock`` of a lock file beside it, held from the
read to the rename. A file system that offers neither is refused, naming it: fencing
never falls back to timing.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

if TYPE_CHECKING:
    from botocore.client import BaseClient

from flintlock.core.errors import CheckpointError


def create_once(filesystem: pafs.FileSystem, path: str, data: bytes) -> bool:
    """Write ``data`` to ``path`` if no file is there; False (nothing written) if one is."""
    local = _local_path(filesystem, path)
    if local is not None:
        return _create_local(local, data)
    if isinstance(filesystem, pafs.S3FileSystem):
        return _create_on_s3(filesystem, path, data)
    raise CheckpointError(
        f"{path} is on a {type(filesystem).__name__}, which cannot create a file only if "
        f"none is there: flintlock's one-driver guarantee needs that (a local or mounted "
        f"file system, or S3), and never falls back to timing"
    )


def replace_if(
    filesystem: pafs.FileSystem,
    path: str,
    data: bytes,
    may_replace: Callable[[bytes | None], bool],
) -> bool:
    """Write ``data`` to ``path`` if ``may_replace(what is there)`` (None: nothing) says
    so when it is written; False (nothing written) if it says no."""
    local = _local_path(filesystem, path)
    if local is not None:
        return _replace_local(local, data, may_replace)
    if isinstance(filesystem, pafs.S3FileSystem):
        return _replace_on_s3(filesystem, path, data, may_replace)
    raise CheckpointError(
        f"{path} is on a {type(filesystem).__name__}, which cannot replace a file only if "
        f"it is still the one checked: flintlock's one-driver guarantee needs that (a local "
        f"or mounted file system, or S3), and never falls back to timing"
    )


SWAP_TRIES = 20
"""Tries of a replace whose ``If-Match`` failed (another writer came between): each
reads what is there again and asks ``may_replace`` again."""


def _replace_local(path: str, data: bytes, may_replace: Callable[[bytes | None], bool]) -> bool:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when the file closes
        try:
            with open(path, "rb") as file:
                current: bytes | None = file.read()
        except FileNotFoundError:
            current = None
        if not may_replace(current):
            return False
        temporary = f"{path}.{uuid.uuid4().hex[:8]}.inprogress"
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    return True


_written: dict[tuple[int, str], tuple[str, bytes]] = {}
"""(client, path) -> the ETag and bytes of this process's last replace of ``path``: the
next replace of it needs no read first (``If-Match`` fails if it changed meanwhile)."""
WRITTEN_KEPT = 100
"""Paths ``_written`` remembers at most (a job replaces its status and little else)."""


def _replace_on_s3(
    filesystem: pafs.S3FileSystem,
    path: str,
    data: bytes,
    may_replace: Callable[[bytes | None], bool],
) -> bool:
    client_error = _client_error(path)
    client = s3_client(filesystem)
    bucket, _, key = path.partition("/")
    for _ in range(SWAP_TRIES):
        known = _written.pop((id(client), path), None)
        if known is not None:  # what this process wrote last: If-Match tells if it still is
            current, condition = known[1], {"IfMatch": known[0]}
        else:
            try:
                answer = client.get_object(Bucket=bucket, Key=key)
                current, condition = answer["Body"].read(), {"IfMatch": answer["ETag"]}
            except client_error as error:
                if _status(error) != 404:
                    raise s3_failure(error, f"s3://{path} cannot be read") from error
                current, condition = None, {"IfNoneMatch": "*"}
        if not may_replace(current):
            return False
        try:
            written = client.put_object(Bucket=bucket, Key=key, Body=data, **condition)
        except client_error as error:
            if _status(error) not in (409, 412):
                raise s3_failure(error, f"s3://{path} cannot be replaced") from error
            continue  # another writer came between: read what is there now
        if len(_written) >= WRITTEN_KEPT:
            _written.clear()
        _written[(id(client), path)] = (written["ETag"], data)
        return True
    raise CheckpointError(
        f"s3://{path} changed under each of {SWAP_TRIES} tries to replace it: another "
        f"writer keeps writing it"
    )


def _status(error: Any) -> Any:
    """The HTTP status of a botocore ClientError."""
    return error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


PASSING = (500, 502, 503, 504)
"""HTTP statuses of a store's passing fault."""


def s3_failure(error: Any, what: str) -> Exception:
    """A failed S3 request as flintlock raises it: a passing fault (boto3 tried it a few
    times already) as an OSError worded so that the caller's ``retrying`` tries again;
    any other as a CheckpointError naming the object."""
    if _status(error) in PASSING or error.response.get("Error", {}).get("Code") == "SlowDown":
        return OSError(f"{what}: HTTP status {_status(error)} from S3: {error}")
    return CheckpointError(f"{what}: {error}")


def _local_path(filesystem: pafs.FileSystem, path: str) -> str | None:
    """The local path of ``path`` if ``filesystem`` is local (or a subtree of one)."""
    if isinstance(filesystem, pafs.LocalFileSystem):
        return path
    if isinstance(filesystem, pafs.SubTreeFileSystem):
        inner = _local_path(filesystem.base_fs, filesystem.base_path.rstrip("/"))
        return None if inner is None else f"{inner}/{path.lstrip('/')}"
    return None


def _create_local(path: str, data: bytes) -> bool:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.{uuid.uuid4().hex[:8]}.inprogress"
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    try:
        os.link(temporary, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary)
    return True


def _client_error(path: str) -> Any:
    """botocore's ClientError; a clear error if boto3 is not installed."""
    try:
        import botocore.exceptions
    except ImportError as error:
        raise CheckpointError(
            f"a job folder on S3 ({path}) needs boto3 for its conditional writes (Arrow "
            f"has none): pip install 'flintlock[s3]'"
        ) from error
    return botocore.exceptions.ClientError


def _create_on_s3(filesystem: pafs.S3FileSystem, path: str, data: bytes) -> bool:
    client_error = _client_error(path)
    bucket, _, key = path.partition("/")
    try:
        s3_client(filesystem).put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except client_error as error:
        if _status(error) in (409, 412):  # PreconditionFailed; ConditionalRequestConflict
            return False
        raise s3_failure(error, f"s3://{path} cannot be created") from error
    return True


_clients: dict[tuple[Any, ...], BaseClient] = {}
S3_ATTEMPTS = 5
"""Tries of one S3 request on a passing fault (HTTP 500/503, throttling, a dropped
connection), with the SDK's standard exponential backoff and jitter between them."""


def s3_client(filesystem: pafs.S3FileSystem, attempts: int = S3_ATTEMPTS) -> BaseClient:
    """A boto3 client that reaches the same endpoint with the same credentials as Arrow.

    For what Arrow's S3 file system cannot do (conditional writes, multipart uploads
    completed later, a read in one request); one client per endpoint, credentials and
    ``attempts`` in a process (1: the caller retries, ``retrying``). Needs boto3."""
    settings = filesystem.__reduce__()[1][0]
    endpoint = settings.get("endpoint_override") or None
    if endpoint and "://" not in endpoint:
        endpoint = f"{settings.get('scheme') or 'https'}://{endpoint}"
    key = (
        endpoint,
        settings.get("region"),
        settings.get("access_key"),
        settings.get("secret_key"),
        attempts,
    )
    client = _clients.get(key)
    if client is None:
        import boto3
        from botocore.config import Config

        client = boto3.session.Session().client(
            "s3",
            config=Config(retries={"mode": "standard", "total_max_attempts": attempts}),
            endpoint_url=endpoint,
            region_name=settings.get("region") or None,
            aws_access_key_id=settings.get("access_key") or None,
            aws_secret_access_key=settings.get("secret_key") or None,
            aws_session_token=settings.get("session_token") or None,
        )
        _clients[key] = client
    return client
