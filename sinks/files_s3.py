"""FileSink on S3: each Parquet file is written under its final key as a multipart upload
and published by ``CompleteMultipartUpload`` at commit: no byte is copied, so a commit
costs the same whatever the files' size (Flink's S3 RecoverableWriter and S3Committer).

A part is uploaded each time the writer's buffer reaches ``part_size`` (S3 takes parts of
5 MiB at least, the last excepted), the last one at pre-commit; the committable records
the upload's id and its parts' numbers, ETags and sizes. Before an upload is created, a
marker naming its key is put in the job's staging folder (``_staging-<job id>/``, where
the staging files are elsewhere): what a killed attempt started is found there, and only
there, so cleaning never touches another job's uploads. A commit that runs again finds
the upload completed (``NoSuchUpload``) and checks the object is the one written: its
size and its multipart ETag (the md5 of the parts' md5s, then ``-<number of parts>``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypedDict, final

import pyarrow.fs as pafs

from flintlock import CommittableError, SinkOutputError
from flintlock.plugin_api import list_folder, s3_client
from flintlock.sinks.optional import require

MIN_PART_SIZE = 5 * 1024 * 1024
"""S3 refuses a smaller part, unless it is the last one."""
DEFAULT_PART_SIZE = 8 * 1024 * 1024


class UploadedPart(TypedDict):
    number: int
    etag: str
    bytes: int


@final
class UploadedParquetFile(TypedDict):
    """A FileSink committable on S3: a multipart upload under the file's final key, all
    its parts uploaded, published by one ``CompleteMultipartUpload``. ``staging`` is the
    upload's marker, ``final`` the file's path (both as the sink's file system names them)."""

    staging: str
    final: str
    bucket: str
    key: str
    upload_id: str
    parts: list[UploadedPart]
    rows: int
    bytes: int


def s3_of(filesystem: pafs.FileSystem) -> tuple[pafs.S3FileSystem, str] | None:
    """The S3 file system under ``filesystem`` and the prefix its paths take there (a
    ``SubTreeFileSystem``'s base path), or None if it is not on S3."""
    if isinstance(filesystem, pafs.S3FileSystem):
        return filesystem, ""
    if isinstance(filesystem, pafs.SubTreeFileSystem):
        inner = s3_of(filesystem.base_fs)
        if inner is not None:
            return inner[0], f"{inner[1]}{filesystem.base_path.strip('/')}/"
    return None


def check_boto3(path: str) -> None:
    """FileSink on S3 needs boto3 (Arrow cannot complete a multipart upload later)."""
    require("boto3", "s3", f"FileSink on S3 ({path}: multipart uploads)")


def check_part_size(part_size: object) -> None:
    """A part size S3 takes: an int of 5 MiB or more (the last part may be smaller)."""
    if isinstance(part_size, bool) or not isinstance(part_size, int) or part_size < MIN_PART_SIZE:
        raise SinkOutputError(
            f"FileSink part_size must be an int of {MIN_PART_SIZE} bytes (5 MiB, S3's "
            f"smallest part) or more, got {part_size!r}"
        )


def multipart_etag(parts: list[UploadedPart]) -> str:
    """The ETag S3 gives the object a multipart upload of ``parts`` completes into."""
    digests = b"".join(bytes.fromhex(part["etag"].strip('"')) for part in parts)
    return f"{hashlib.md5(digests).hexdigest()}-{len(parts)}"


class S3Files:
    """The multipart uploads of one FileSink, through a boto3 client that reaches the
    same endpoint with the same credentials as the sink's pyarrow file system."""

    def __init__(self, filesystem: pafs.FileSystem, path: str) -> None:
        found = s3_of(filesystem)
        assert found is not None, "S3Files on a file system that is not S3"
        check_boto3(path)
        self.filesystem = filesystem
        self.client = s3_client(found[0])
        self.prefix = found[1]

    @classmethod
    def of(cls, filesystem: pafs.FileSystem, path: str) -> S3Files | None:
        """The multipart uploads of a FileSink at ``path`` if it is on S3, else None."""
        return cls(filesystem, path) if s3_of(filesystem) is not None else None

    def locate(self, path: str) -> tuple[str, str]:
        """Bucket and key of a path of the sink's file system."""
        bucket, _, key = f"{self.prefix}{path}".partition("/")
        return bucket, key

    def call(self, what: str, request: Callable[..., Any], **arguments: Any) -> Any:
        """One request; a failure is a SinkOutputError saying what it was for."""
        try:
            return request(**arguments)
        except Exception as error:
            where = f"s3://{arguments.get('Bucket')}/{arguments.get('Key')}"
            raise SinkOutputError(f"FileSink could not {what} {where}: {error}") from error

    # ---- writer side ----

    def start(self, marker: str, final: str, part_size: int) -> MultipartUpload:
        """The upload of ``final``: its marker put and the upload created in the background,
        while the writer encodes the first part."""
        return MultipartUpload(self, marker, final, part_size)

    def create(self, marker: str, bucket: str, key: str) -> str:
        """Put the upload's marker, then create the upload: its id."""
        marker_bucket, marker_key = self.locate(marker)
        body = json.dumps({"key": key}).encode()
        put = self.client.put_object
        self.call("write the upload marker", put, Bucket=marker_bucket, Key=marker_key, Body=body)
        create = self.client.create_multipart_upload
        created = self.call("start the multipart upload of", create, Bucket=bucket, Key=key)
        return str(created["UploadId"])

    def abort(self, file: dict[str, Any]) -> None:
        """Abort a transaction's upload (if it was created) and drop its marker."""
        if file.get("upload_id"):
            abort = self.client.abort_multipart_upload
            at = {"Bucket": file["bucket"], "Key": file["key"], "UploadId": file["upload_id"]}
            self.call("abort the upload of", abort, **at)
        marker_bucket, marker_key = self.locate(file["staging"])
        self.call("delete", self.client.delete_object, Bucket=marker_bucket, Key=marker_key)

    # ---- committer side ----

    def verify(self, file: UploadedParquetFile, stuck: str) -> None:
        """Check the upload holds the parts written, or was completed into the object
        written (a commit that runs again): else a CommittableError naming the key."""
        at = {"Bucket": file["bucket"], "Key": file["key"], "UploadId": file["upload_id"]}
        try:
            listed = self.client.list_parts(**at, MaxParts=10000)
        except Exception as error:
            if error_code(error) != "NoSuchUpload":
                raise CommittableError(
                    f"cannot list the parts of s3://{file['bucket']}/{file['key']}: {error}{stuck}"
                ) from error
            self._check_published(file, stuck)
            return
        found = [
            (p["PartNumber"], p["ETag"].strip('"'), p["Size"]) for p in listed.get("Parts", [])
        ]
        written = [(p["number"], p["etag"].strip('"'), p["bytes"]) for p in file["parts"]]
        if found != written:
            raise CommittableError(
                f"the multipart upload of s3://{file['bucket']}/{file['key']} holds the parts "
                f"{found}, {written} were written (changed or damaged){stuck}"
            )

    def complete(self, file: UploadedParquetFile, stuck: str = "") -> None:
        """Publish the upload: one CompleteMultipartUpload; done already if completed."""
        at = {"Bucket": file["bucket"], "Key": file["key"], "UploadId": file["upload_id"]}
        parts = [{"PartNumber": p["number"], "ETag": p["etag"]} for p in file["parts"]]
        try:
            self.client.complete_multipart_upload(**at, MultipartUpload={"Parts": parts})
        except Exception as error:
            if error_code(error) != "NoSuchUpload":
                raise CommittableError(
                    f"cannot complete the upload of s3://{file['bucket']}/{file['key']}: "
                    f"{error}{stuck}"
                ) from error
            self._check_published(file, stuck)

    def drop_markers(self, files: list[UploadedParquetFile]) -> None:
        """Delete the markers of completed uploads: one request per 1,000."""
        located = [self.locate(file["staging"]) for file in files]
        for start in range(0, len(located), 1000):
            chunk = located[start : start + 1000]
            objects = {"Objects": [{"Key": key} for _, key in chunk], "Quiet": True}
            delete = self.client.delete_objects
            self.call("delete upload markers in", delete, Bucket=chunk[0][0], Delete=objects)

    def _check_published(self, file: UploadedParquetFile, stuck: str) -> None:
        """The upload is gone: its object must be there, with its size and ETag."""
        where = f"s3://{file['bucket']}/{file['key']}"
        try:
            head = self.client.head_object(Bucket=file["bucket"], Key=file["key"])
        except Exception as error:
            if error_code(error) not in ("404", "NoSuchKey", "NotFound"):
                raise CommittableError(f"cannot read {where}: {error}{stuck}") from error
            raise CommittableError(
                f"the multipart upload {file['upload_id']} of {where} is gone and was never "
                f"completed: its {file['rows']} rows are lost for good{stuck}"
            ) from error
        etag, size = head["ETag"].strip('"'), head["ContentLength"]
        expected = multipart_etag(file["parts"])
        if etag != expected or size != file["bytes"]:
            raise CommittableError(
                f"the object {where} is not the one written: ETag {etag} and {size} bytes, "
                f"the upload {file['upload_id']} makes {expected} and {file['bytes']}{stuck}"
            )

    def abort_unreferenced(self, staging_dir: str, keep: list[Any]) -> None:
        """Abort the uploads whose marker in ``staging_dir`` no kept committable names,
        and drop those markers (and staging files an older FileSink left there); kept
        uploads, and other jobs', are never touched."""
        kept_markers = {file["staging"] for file in keep}
        kept_uploads = {file.get("upload_id") for file in keep}
        for info in list_folder(self.filesystem, staging_dir):
            if info.type != pafs.FileType.File or info.path in kept_markers:
                continue
            bucket, marker_key = self.locate(info.path)
            read = self.client.get_object
            body = self.call("read the upload marker", read, Bucket=bucket, Key=marker_key)
            key = _marked_key(body["Body"].read())
            if key is not None:
                self._abort_uploads_of(bucket, key, kept_uploads)
            delete = self.client.delete_object  # not pyarrow's: it would leave a folder object
            self.call("delete", delete, Bucket=bucket, Key=marker_key)

    def _abort_uploads_of(self, bucket: str, key: str, kept_uploads: set[Any]) -> None:
        """Abort every pending upload of ``key`` but the kept ones."""
        listing = self.client.list_multipart_uploads
        listed = self.call("list the uploads of", listing, Bucket=bucket, Prefix=key)
        for upload in listed.get("Uploads", []):
            if upload["Key"] == key and upload["UploadId"] not in kept_uploads:
                at = {"Bucket": bucket, "Key": key, "UploadId": upload["UploadId"]}
                self.call("abort the upload of", self.client.abort_multipart_upload, **at)


def _marked_key(marker: bytes) -> str | None:
    """The key an upload marker names; None for a staging file of an older FileSink."""
    try:
        document = json.loads(marker)
    except (UnicodeDecodeError, ValueError):
        return None
    return document.get("key") if isinstance(document, dict) else None


class MultipartUpload:
    """A file object a ParquetWriter writes into: its bytes go to S3 as the parts of one
    multipart upload, a part each time ``part_size`` bytes are buffered, the rest at
    ``close``. As Flink's S3 writer, requests run in the background (a small pool per
    process) while the writer goes on encoding, at most two parts of an upload in flight;
    ``close`` waits for them and raises the first failure."""

    def __init__(self, files: S3Files, marker: str, final: str, part_size: int) -> None:
        self.files = files
        self.marker = marker
        self.final = final
        self.bucket, self.key = files.locate(final)
        self.part_size = part_size
        self.created = _requests().submit(files.create, marker, self.bucket, self.key)
        self.sent: list[Future[UploadedPart]] = []
        self.buffer = bytearray()
        self.position = 0
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        if not self.closed:
            self.buffer += data
            self.position += len(data)
            if len(self.buffer) >= self.part_size:
                self._send_part()
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        """Nothing: parts leave at their size, the last one at ``close``."""

    def writable(self) -> bool:
        return True

    def committable(self) -> dict[str, Any]:
        """The committable's names, known when the file opens."""
        names = {"staging": self.marker, "final": self.final}
        return names | {"bucket": self.bucket, "key": self.key}

    def close(self) -> dict[str, Any]:
        """Upload the last part (the whole file, if it is smaller than a part) and wait
        for every part: the committable's upload id, parts and bytes."""
        if not self.closed:
            if self.buffer or not self.sent:
                self._send_part()
            self.closed = True
        parts = [sent.result() for sent in self.sent]
        return {"upload_id": self.created.result(), "parts": parts, "bytes": self.position}

    def drop(self) -> dict[str, Any]:
        """Stop writing (the last part is never sent); the upload id to abort, if the
        upload was created."""
        self.closed = True
        self.buffer.clear()
        wait(self.sent)
        created = self.created.exception() is None
        return {"upload_id": self.created.result()} if created else {}

    def _send_part(self) -> None:
        in_flight = [sent for sent in self.sent if not sent.done()]
        if len(in_flight) >= 2:  # bounded memory: the writer waits for the oldest
            wait(in_flight[:1])
        body = bytes(self.buffer)
        self.buffer.clear()
        self.sent.append(_requests().submit(self._upload, len(self.sent) + 1, body))

    def _upload(self, number: int, body: bytes) -> UploadedPart:
        sent = self.files.call(
            f"upload part {number} of",
            self.files.client.upload_part,
            Bucket=self.bucket,
            Key=self.key,
            UploadId=self.created.result(),
            PartNumber=number,
            Body=body,
        )
        return {"number": number, "etag": sent["ETag"].strip('"'), "bytes": len(body)}


_pool: list[ThreadPoolExecutor] = []


def _requests() -> ThreadPoolExecutor:
    """The process's pool for upload requests (an upload's creation is queued before its
    parts, which wait for it: no part can hold every thread while its creation waits)."""
    if not _pool:
        _pool.append(ThreadPoolExecutor(max_workers=4, thread_name_prefix="flintlock-s3"))
    return _pool[0]


def error_code(error: Exception) -> str:
    """The S3 error code of a botocore ClientError ("" for any other error)."""
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))
