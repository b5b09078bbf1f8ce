"""Create a file only if none is there: the one conditional write fencing rests on.

A lease generation, a checkpoint's metadata and a commit record are each created once;
a second writer of the same name fails instead of overwriting, whatever the timing. On a
local or mounted file system the whole file is written under a unique name and then
hard-linked to its name (``link`` fails if the name exists, atomically, and readers
never see a partial file); on S3 it is a ``PutObject`` with ``If-None-Match: *``. A file
system that offers neither is refused, naming it: fencing never falls back to timing.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pyarrow.fs as pafs

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


def _create_on_s3(filesystem: pafs.S3FileSystem, path: str, data: bytes) -> bool:
    try:
        import botocore.exceptions
    except ImportError as error:
        raise CheckpointError(
            f"a job folder on S3 ({path}) needs boto3 for its conditional writes (Arrow "
            f"has none): pip install 'flintlock[s3]'"
        ) from error
    bucket, _, key = path.partition("/")
    try:
        _s3_client(filesystem).put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except botocore.exceptions.ClientError as error:
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in (409, 412):  # PreconditionFailed; ConditionalRequestConflict
            return False
        if status in _PASSING or error.response.get("Error", {}).get("Code") == "SlowDown":
            # boto3 tried it a few times already; the caller's ``retrying`` tries again
            raise OSError(f"HTTP status {status} from S3: {error}") from error
        raise CheckpointError(f"s3://{path} cannot be created: {error}") from error
    return True


_PASSING = (500, 502, 503, 504)
"""HTTP statuses of a store's passing fault: an OSError worded so that ``retrying``
tries the create again (another answer than 412 is never taken as "created")."""


_clients: dict[tuple[Any, ...], Any] = {}


def _s3_client(filesystem: pafs.S3FileSystem) -> Any:
    """A boto3 client that reaches the same endpoint with the same credentials as Arrow."""
    settings = filesystem.__reduce__()[1][0]
    endpoint = settings.get("endpoint_override") or None
    if endpoint and "://" not in endpoint:
        endpoint = f"{settings.get('scheme') or 'https'}://{endpoint}"
    key = (endpoint, settings.get("region"), settings.get("access_key"))
    client = _clients.get(key)
    if client is None:
        import boto3

        client = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name=settings.get("region") or None,
            aws_access_key_id=settings.get("access_key") or None,
            aws_secret_access_key=settings.get("secret_key") or None,
            aws_session_token=settings.get("session_token") or None,
        )
        _clients[key] = client
    return client
