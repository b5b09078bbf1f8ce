"""Whole objects read and written in one request each: ``GetObject``, ``PutObject``.

Through pyarrow, a write to S3 of any size is a multipart upload (three requests) and
each folder it "creates" is a marker object after two lookups; a read is a ``HeadObject``
(the size) before the ``GetObject``. A checkpoint's small files cost ~8 requests each
that way, most of an epoch's time on an object store (bench/RESULTS.md, "W4 on S3").
Object stores have no folders, and a ``PutObject`` is atomic: a whole object or none, so
a write needs no temporary name either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock.core.storage.conditional import s3_client, s3_failure

if TYPE_CHECKING:
    from botocore.client import BaseClient

T = TypeVar("T")

OBJECT_STORES = (pafs.S3FileSystem, pafs.GcsFileSystem)
"""File systems whose folders are only key prefixes, and whose uploads appear whole."""
SINGLE_PUT_LIMIT = 5 * 1024**3
"""S3's largest ``PutObject``; a larger write goes through pyarrow's multipart upload."""


def is_object_store(filesystem: pafs.FileSystem) -> bool:
    """Whether ``filesystem`` is an object store: nothing to create before a write."""
    return isinstance(filesystem, OBJECT_STORES)


def put(filesystem: pafs.FileSystem, path: str, data: bytes | pa.Buffer) -> None:
    """Write ``data`` to ``path`` whole: one ``PutObject`` on S3, else a pyarrow stream.

    A failed request is an OSError (worded as a passing fault when it is one), which
    ``retrying`` tries again or names the file of."""
    if isinstance(filesystem, pafs.S3FileSystem) and len(data) <= SINGLE_PUT_LIMIT:
        _put_on_s3(filesystem, path, data)
        return
    with filesystem.open_output_stream(path) as sink:
        sink.write(data)


def get(filesystem: pafs.FileSystem, path: str) -> bytes:
    """The whole file at ``path``: one ``GetObject`` on S3, else a pyarrow stream.

    FileNotFoundError if there is none; any other failure is an OSError, as for ``put``."""
    if isinstance(filesystem, pafs.S3FileSystem):
        return _get_on_s3(filesystem, path)
    with filesystem.open_input_stream(path) as source:
        data: bytes = source.read()
        return data


def _get_on_s3(filesystem: pafs.S3FileSystem, path: str) -> bytes:
    import botocore.exceptions

    bucket, _, key = path.partition("/")

    def read() -> bytes:
        try:
            data: bytes = _client(filesystem).get_object(Bucket=bucket, Key=key)["Body"].read()
            return data
        except botocore.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise FileNotFoundError(f"s3://{path}: no such object") from error
            raise

    return _on_s3(path, "read", read)


def delete(filesystem: pafs.FileSystem, path: str) -> None:
    """Remove the file at ``path`` if there is one: one ``DeleteObject`` on S3 (pyarrow
    looks the key up first and then writes a marker for its "folder")."""
    if isinstance(filesystem, pafs.S3FileSystem):
        bucket, _, key = path.partition("/")
        _on_s3(path, "removed", lambda: _client(filesystem).delete_object(Bucket=bucket, Key=key))
        return
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_file(path)


DELETE_BATCH = 1000
"""Keys one S3 ``DeleteObjects`` request takes at most."""


def delete_tree(filesystem: pafs.FileSystem, path: str) -> None:
    """Remove the folder ``path`` and everything under it, if it exists: on S3 one listing
    (a page per 1,000 keys) and one ``DeleteObjects`` per 1,000 keys."""
    if not isinstance(filesystem, pafs.S3FileSystem):
        if filesystem.get_file_info(path).type == pafs.FileType.Directory:
            filesystem.delete_dir(path)
        return
    client = _client(filesystem)
    bucket, _, key = path.rstrip("/").partition("/")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{key}/")
    keys = _on_s3(path, "listed", lambda: [o["Key"] for p in pages for o in p.get("Contents", [])])
    for start in range(0, len(keys), DELETE_BATCH):
        batch = [{"Key": k} for k in keys[start : start + DELETE_BATCH]]

        def remove(batch: list[dict[str, str]] = batch) -> dict[str, Any]:
            return client.delete_objects(  # type: ignore[no-any-return]
                Bucket=bucket, Delete={"Objects": batch, "Quiet": True}
            )

        answer = _on_s3(path, "removed", remove)
        if answer.get("Errors"):
            first = answer["Errors"][0]
            raise OSError(
                f"s3://{bucket}/{first.get('Key')} cannot be removed: {first.get('Code')} "
                f"{first.get('Message')} ({len(answer['Errors'])} keys failed)"
            )


def _client(filesystem: pafs.S3FileSystem) -> BaseClient:
    """The boto3 client of these requests: one try each, ``retrying`` tries again (two
    layers of retries would multiply: 4 x 5 tries of a lasting fault)."""
    return s3_client(filesystem, attempts=1)


def _on_s3(path: str, done: str, call: Callable[[], T]) -> T:
    """``call()``, its S3 failure as an OSError naming ``path`` (``retrying`` retries a
    passing one)."""
    import botocore.exceptions

    try:
        return call()
    except botocore.exceptions.ClientError as error:
        failure = s3_failure(error, f"s3://{path} cannot be {done}")
        raise OSError(str(failure)) from error
    except botocore.exceptions.BotoCoreError as error:  # a dropped connection, a timeout
        raise OSError(f"NETWORK_CONNECTION: {error}") from error


def _put_on_s3(filesystem: pafs.S3FileSystem, path: str, data: bytes | pa.Buffer) -> None:
    bucket, _, key = path.partition("/")
    body = data if isinstance(data, bytes) else data.to_pybytes()
    _on_s3(
        path, "written", lambda: _client(filesystem).put_object(Bucket=bucket, Key=key, Body=body)
    )
