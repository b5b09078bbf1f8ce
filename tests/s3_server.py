"""A real S3-compatible server for the tests: moto's server mode on a free loopback port,
with one bucket, reached by pyarrow's own S3 client over HTTP (no mock of pyarrow).

Fixtures: ``s3`` (the session's server) and ``s3_folder`` (a fresh folder in its bucket
per test, as a URI that flintlock, pyarrow and Spark's Python workers all open alike).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow.fs as pafs
import pytest

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

    def filesystem(self) -> pafs.FileSystem:
        """pyarrow's S3 file system at this server (paths start with the bucket)."""
        return pafs.FileSystem.from_uri(self.uri())[0]


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """moto's S3 server on a free loopback port for the session, with the bucket made."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        running = S3Server(host, port)
        uri = running.uri().replace("region=", "allow_bucket_creation=true&region=")
        filesystem, _ = pafs.FileSystem.from_uri(uri)
        filesystem.create_dir(BUCKET)
        yield running
    finally:
        server.stop()


@pytest.fixture
def s3_folder(s3: S3Server) -> str:
    """A folder of its own in the bucket for one test: its path (without the bucket)."""
    return f"test-{uuid.uuid4().hex[:12]}"
