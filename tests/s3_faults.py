"""A fault-injecting HTTP proxy in front of the test S3 server: it forwards every request
to moto and answers chosen ones (the next N requests of an S3 operation, reads or
writes, optionally only those of keys containing some text) with an S3 error of its own,
as a real object store's passing or lasting fault would (no mock of pyarrow or boto3:
their S3 clients talk HTTP to it on loopback). It counts every request by its S3
operation (``counts``), so a test can say which requests a step made."""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import parse_qs, urlsplit

Operation = Literal[
    "GetObject",
    "HeadObject",
    "ListObjects",
    "PutObject",
    "CopyObject",
    "UploadPart",
    "DeleteObject",
    "CreateMultipartUpload",
    "CompleteMultipartUpload",
    "DeleteObjects",
]

ERRORS = {
    500: ("InternalError", "We encountered an internal error. Please try again."),
    403: ("AccessDenied", "Access Denied"),
}
HOP_BY_HOP = {"connection", "transfer-encoding", "content-length", "server", "date"}


MULTIPART = {
    ("POST", "uploads"): "CreateMultipartUpload",
    ("POST", "uploadId"): "CompleteMultipartUpload",
    ("PUT", "uploadId"): "UploadPart",
    ("DELETE", "uploadId"): "AbortMultipartUpload",
    ("GET", "uploadId"): "ListParts",
    ("GET", "uploads"): "ListMultipartUploads",
    ("POST", "delete"): "DeleteObjects",
}
"""(method, query parameter) -> the operation of a request that has that parameter."""


def operation_of(method: str, target: str, copy_source: bool = False) -> str:
    """The S3 operation of a request: a GET or HEAD of a key (GetObject, HeadObject), a
    GET of a bucket (ListObjects), a multipart request, a PUT (PutObject, or CopyObject
    with an ``x-amz-copy-source`` header), a DELETE (DeleteObject); else the method."""
    parts = urlsplit(target)
    of_key = "/" in parts.path.strip("/")
    for parameter in parse_qs(parts.query, keep_blank_values=True):
        if (method, parameter) in MULTIPART:
            return "UploadPartCopy" if copy_source else MULTIPART[method, parameter]
    if method == "PUT" and of_key:
        return "CopyObject" if copy_source else "PutObject"
    if method == "DELETE" and of_key:
        return "DeleteObject"
    if method == "HEAD" and of_key:
        return "HeadObject"
    if method != "GET":
        return method
    return "GetObject" if of_key else "ListObjects"


class FaultInjectingProxy:
    """Forwards to ``upstream`` (host:port); the next ``count`` requests of ``operation``
    (of keys containing ``where``) get HTTP ``status`` with the S3 error body instead."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.lock = threading.Lock()
        self.pending: dict[tuple[str, str], tuple[int, int]] = {}
        """(operation, text in the key) -> (requests still to fail, status)."""
        self.injected: dict[str, int] = {}
        """Operation -> how many requests were answered with an error."""
        self.counts: Counter[str] = Counter()
        """Operation -> how many requests of it arrived (forwarded or answered)."""
        self.requests: list[tuple[str, str]] = []
        """(operation, path) of every request, in order of arrival."""
        self.targets: list[tuple[str, str, float]] = []
        """(operation, path and query, ``time.monotonic()``) of every request, in order
        of arrival."""
        self.upstream_seconds: Counter[str] = Counter()
        """Operation -> seconds its forwarded requests took at the server, all told."""
        self.gate: tuple[str, threading.Barrier] | None = None
        self.met: list[bool] = []
        self.admitted = 0
        """Per request held at the gate (``hold_until_together``): whether the others came
        while it was held."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else a small answer waits 40 ms for an ACK

            def log_message(self, *args: object) -> None:
                pass

            def handle_one(self) -> None:
                body = self._body()
                copy = "x-amz-copy-source" in {name.lower() for name in self.headers}
                operation = operation_of(self.command, self.path, copy)
                with proxy.lock:
                    proxy.counts[operation] += 1
                    proxy.requests.append((operation, urlsplit(self.path).path))
                    proxy.targets.append((operation, self.path, time.monotonic()))
                proxy.wait_at_gate(operation)
                status = proxy.take_fault(operation, self.path)
                if status is not None:
                    self._answer_error(status)
                else:
                    started = time.perf_counter()
                    self._forward(body)
                    with proxy.lock:
                        proxy.upstream_seconds[operation] += time.perf_counter() - started

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_one

            def _body(self) -> bytes | None:
                """The request's body as sent: chunked bodies whole, framing and all."""
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    raw = b""
                    while True:
                        line = self.rfile.readline()
                        raw += line
                        size = int(line.split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            break
                        raw += self.rfile.read(size + 2)
                    while True:  # trailers, then the blank line
                        line = self.rfile.readline()
                        raw += line
                        if line in (b"\r\n", b"\n", b""):
                            return raw
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            def _answer_error(self, status: int) -> None:
                code, message = ERRORS[status]
                body = (
                    f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                    f"<Message>{message}</Message></Error>"
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _forward(self, body: bytes | None) -> None:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}
                connection = http.client.HTTPConnection(proxy.upstream, timeout=30)
                try:
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    data = response.read()
                finally:
                    connection.close()
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in HOP_BY_HOP:
                        self.send_header(name, value)
                length = response.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

        self.server = _ProxyServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def fail(self, operation: Operation, count: int, status: int = 500, where: str = "") -> None:
        """Answer the next ``count`` requests of ``operation`` whose target (bucket, key
        and query, URL-encoded) contains ``where`` with HTTP ``status``."""
        with self.lock:
            self.pending[(operation, where)] = (count, status)
            self.injected[operation] = 0

    def hold_until_together(self, operation: Operation, parties: int, most: float = 20.0) -> None:
        """Hold each of the next ``parties`` requests of ``operation`` until all of them
        arrived (``met`` then says True for each): requests sent side by side meet, one
        sent after another's answer never does (each gives up after ``most`` seconds, a
        bound on the test's time, not a condition of its outcome)."""
        with self.lock:
            self.gate = (operation, threading.Barrier(parties, timeout=most))
            self.met, self.admitted = [], 0

    def wait_at_gate(self, operation: str) -> None:
        """Hold a request at the gate, if it is one of those it waits for."""
        with self.lock:
            gate = self.gate
            if gate is None or gate[0] != operation:
                return
            if self.admitted >= gate[1].parties:
                return  # the gate is full: later requests pass
            self.admitted += 1
        try:
            gate[1].wait()
            met = True
        except threading.BrokenBarrierError:
            met = False
        with self.lock:
            self.met.append(met)

    def take_fault(self, operation: str, target: str = "") -> int | None:
        """The status to answer this request with, or None to forward it."""
        with self.lock:
            for (failing, where), (count, status) in self.pending.items():
                if failing == operation and where in target and count > 0:
                    self.pending[(failing, where)] = (count - 1, status)
                    self.injected[operation] = self.injected.get(operation, 0) + 1
                    return status
            return None

    def __enter__(self) -> FaultInjectingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _ProxyServer(ThreadingHTTPServer):
    """socketserver's backlog of 5 drops SYNs while a loaded machine accepts slowly (each
    sent again only after 1, 2, 4, ... s): room for every client's connections instead."""

    daemon_threads = True
    request_queue_size = 1024
