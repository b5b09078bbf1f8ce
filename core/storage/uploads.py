"""Writes to object stores in as few requests as they need: one ``PutObject``.

Through pyarrow, a write to S3 of any size is a multipart upload (three requests) and
each folder it "creates" is a marker object after two lookups: a checkpoint's small
files cost ~8 requests each, most of an epoch's time on an object store (bench/RESULTS.md,
"W4 on S3"). Object stores have no folders, and a ``PutObject`` is atomic: a whole object
or none, so a write needs no temporary name either.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock.core.storage.conditional import s3_client, s3_failure

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


def _put_on_s3(filesystem: pafs.S3FileSystem, path: str, data: bytes | pa.Buffer) -> None:
    import botocore.exceptions

    bucket, _, key = path.partition("/")
    body = data if isinstance(data, bytes) else data.to_pybytes()
    try:
        s3_client(filesystem).put_object(Bucket=bucket, Key=key, Body=body)
    except botocore.exceptions.ClientError as error:
        failure = s3_failure(error, f"s3://{path} cannot be written")
        raise OSError(str(failure)) from error  # ``retrying`` retries or names the file
    except botocore.exceptions.BotoCoreError as error:  # a dropped connection, a timeout
        raise OSError(f"NETWORK_CONNECTION: {error}") from error
