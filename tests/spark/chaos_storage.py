"""Where a chaos plan's jobs keep their storage: a local folder, or a prefix on an S3
server given by plain ``s3://bucket/prefix`` URIs and the environment's ``storage_options``.

The test reads and damages that storage from outside the drivers (job folders, leases,
control requests, result stores, the sinks' committed Parquet) through one pyarrow file
system, so the same checks judge a plan on disk and on S3. Marker files, the plans the
drivers read and their logs stay on local disk either way.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint.storage import CheckpointStorage, list_folder
from flintlock.plugin_api import StorageOptions

ENVIRONMENT_KEYS = {
    "aws_access_key_id": ("AWS_ACCESS_KEY_ID",),
    "aws_secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "aws_session_token": ("AWS_SESSION_TOKEN",),
    "aws_region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "aws_endpoint_url": ("AWS_ENDPOINT_URL",),
}
"""The AWS SDKs' environment variables of each storage option: the CLI (``flintlock
stop s3://...``) takes the store's settings from its environment, as a user runs it."""


@dataclass(frozen=True)
class ChaosStorage:
    """A plan's storage root (a local path or a plain ``s3://`` URI) and its options."""

    root: str
    options: dict[str, str] = field(default_factory=dict)
    """The environment's ``storage_options`` ({} on disk): they reach the drivers in the
    plan's JSON, never inside a URI."""

    @property
    def on_s3(self) -> bool:
        return self.root.startswith("s3://")

    def uri(self, relative: str) -> str:
        """What a job names for ``relative`` under the root (``chk``, ``out/<job>``)."""
        return f"{self.root.rstrip('/')}/{relative}"

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        """The file system and the root's path on it."""
        filesystem, path = StorageOptions(self.options).filesystem(self.root)
        return filesystem, path.rstrip("/")

    def path(self, relative: str) -> str:
        """``relative``'s path on ``filesystem()``."""
        return f"{self.filesystem()[1]}/{relative}"

    def checkpoints(self) -> CheckpointStorage:
        """The plan's checkpoint directory (``chk``), opened as the drivers open it."""
        return CheckpointStorage.from_uri(self.uri("chk"), StorageOptions(self.options))

    def job_storage(self, job: str) -> CheckpointStorage:
        """Storage rooted at one job's folder (chaos job names need no escape)."""
        return CheckpointStorage.from_uri(self.uri(f"chk/{job}"), StorageOptions(self.options))

    def files(self, relative: str, pattern: str = "*") -> list[str]:
        """Files anywhere under ``relative`` whose path (from the root) matches ``pattern``."""
        filesystem, root = self.filesystem()
        return sorted(
            info.path[len(root) + 1 :]
            for info in list_folder(filesystem, f"{root}/{relative}", recursive=True)
            if info.type == pafs.FileType.File
            and fnmatch.fnmatchcase(info.path[len(root) + 1 :], pattern)
        )

    def exists(self, relative: str) -> bool:
        filesystem, root = self.filesystem()
        return bool(filesystem.get_file_info(f"{root}/{relative}").type == pafs.FileType.File)

    def read(self, relative: str) -> bytes:
        filesystem, root = self.filesystem()
        with filesystem.open_input_stream(f"{root}/{relative}") as source:
            data: bytes = source.read()
            return data

    def write(self, relative: str, data: bytes) -> None:
        """Replace the file at ``relative`` (on S3: a new object under the same key)."""
        filesystem, root = self.filesystem()
        with filesystem.open_output_stream(f"{root}/{relative}") as sink:
            sink.write(data)

    def environment(self) -> dict[str, str]:
        """Environment variables that give a CLI process the store's settings."""
        return {
            name: value
            for key, value in self.options.items()
            for name in ENVIRONMENT_KEYS[key.lower()]
        }

    def pending_uploads(self) -> list[str]:
        """Multipart uploads begun under the root and never completed nor aborted (each
        holds parts a reader never sees, billed until aborted); none on disk."""
        if not self.on_s3:
            return []
        import boto3

        bucket, _, prefix = self.filesystem()[1].partition("/")
        client: Any = boto3.session.Session().client(
            "s3",
            endpoint_url=self.options.get("aws_endpoint_url"),
            region_name=self.options.get("aws_region"),
            aws_access_key_id=self.options.get("aws_access_key_id"),
            aws_secret_access_key=self.options.get("aws_secret_access_key"),
        )
        listed = client.list_multipart_uploads(Bucket=bucket, Prefix=f"{prefix}/")
        return sorted(upload["Key"] for upload in listed.get("Uploads", []))
