"""A real S3-compatible server for the tests: moto's server mode on a free loopback port,
with one bucket, reached by pyarrow's own S3 client over HTTP (no mock of pyarrow).

Fixtures: ``s3`` (the session's server) and ``s3_folder`` (a fresh folder in its bucket
per test, as a URI that flintlock, pyarrow and Spark's Python workers all open alike).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs
import pytest
from s3_faults import FaultInjectingProxy

BUCKET = "flintlock-tests"
CREDENTIALS = "testing:testing"
"""moto takes any keys; they travel in the URI, so Spark's workers (started before the
server, with the environment they had then) need no environment variables."""


@dataclass(frozen=True)
class S3Server:
    """One running moto server: where it listens, and URIs of paths in its bucket."""

    host: str
    port: int

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def uri(self, path: str = "", endpoint: str | None = None) -> str:
        """``s3://`` URI of ``path`` in the bucket, at this server (or at ``endpoint``,
        a proxy in front of it)."""
        options = f"endpoint_override={endpoint or self.endpoint}&scheme=http&region=us-east-1"
        return f"s3://{CREDENTIALS}@{BUCKET}/{path.strip('/')}?{options}"

    def storage_options(self, secret: str = "testing") -> dict[str, str]:
        """The environment's ``storage_options`` for this server (any keys do for moto:
        a distinctive ``secret`` lets a test look for it where it must not be)."""
        return {
            "aws_access_key_id": "testing",
            "aws_secret_access_key": secret,
            "aws_endpoint_url": f"http://{self.endpoint}",
            "aws_region": "us-east-1",
        }

    def delta_options(self, **more: str) -> dict[str, str]:
        """delta-rs storage options for this server, in delta-rs's own upper-case keys as
        a DeltaSink user writes them, and ``more``; requests fail in seconds."""
        return {
            "AWS_ENDPOINT_URL": f"http://{self.endpoint}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
            "max_retries": "1",  # a request that never completes fails in seconds
            **more,
        }

    def client(self) -> Any:
        """A boto3 S3 client of this server (for what pyarrow cannot ask of it)."""
        import boto3

        return boto3.session.Session().client(
            "s3",
            endpoint_url=f"http://{self.endpoint}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def plain_uri(self, path: str = "") -> str:
        """``s3://bucket/path`` with nothing else: storage options say the rest."""
        return f"s3://{BUCKET}/{path.strip('/')}"

    def filesystem(self) -> pafs.FileSystem:
        """pyarrow's S3 file system at this server (paths start with the bucket)."""
        return pafs.FileSystem.from_uri(self.uri())[0]


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """moto's S3 server on a free loopback port for the session, with the bucket made.

    In a process of its own: delta-rs holds the GIL in some calls (``is_deltatable``),
    which would stall a server thread in the test's process until the call times out."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        running = S3Server("127.0.0.1", port)
        wait_until_serving(running, server)
        uri = running.uri().replace("region=", "allow_bucket_creation=true&region=")
        filesystem, _ = pafs.FileSystem.from_uri(uri)
        filesystem.create_dir(BUCKET)
        yield running
    finally:
        server.terminate()
        server.wait(timeout=30)


def free_port() -> int:
    """A loopback port no one listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_serving(running: S3Server, server: subprocess.Popen[bytes]) -> None:
    """Until the server answers HTTP (it imports moto first: a few seconds)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"moto's server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"http://{running.endpoint}/moto-api/", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"moto's server on {running.endpoint} did not answer in 60 s")


@pytest.fixture
def s3_folder(s3: S3Server) -> str:
    """A folder of its own in the bucket for one test: its path (without the bucket)."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def s3_proxy(s3: S3Server) -> Iterator[FaultInjectingProxy]:
    """A proxy in front of the session's server that counts requests and injects the
    faults a test asks for (tests/s3_faults.py)."""
    with FaultInjectingProxy(s3.endpoint) as running:
        yield running
