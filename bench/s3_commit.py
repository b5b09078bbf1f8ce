"""What one FileSink commit costs on S3 as the epoch's file grows: the copy-based commit
(stage, then rename: a server-side copy of every byte and a delete) against the multipart
commit (one CompleteMultipartUpload), with a plain pyarrow write of the same file to the
same server as the baseline, all in one run.

The server is moto's, in its own process on loopback (``moto_server``), so that its work
(the copy of the old commit included) does not share the benchmark's interpreter. For each
size, a Parquet file of random int64 values (they do not compress) is

- ``plain write``: written by ``pyarrow.parquet.write_table`` to its name (the baseline);
- ``copy commit``: staged by pyarrow under ``_staging-*/`` as FileSink did before issue 34,
  then committed by FileSink's staging path (check the staged file, ``move``);
- ``multipart commit``: written by FileSink's writer (parts uploaded while it writes, the
  last at pre-commit), then committed (check the parts, complete the upload).

Each is timed as write, commit, and both; medians of ``--runs`` interleaved runs after a
warm-up; every committed file is read back and checked (rows and sum) before timing. The
commits go through a proxy that counts their requests (tests/s3_faults.py; the writes go
to the server directly): ``server's copy/complete s`` is how long the server took to
answer the commit's CopyObject or CompleteMultipartUpload, ``rest of commit s`` the rest of
the commit (flintlock's checks and bookkeeping), and the last column lists its requests.

    python bench/s3_commit.py [--sizes 1,8,32,128] [--runs 3] [--server host:port]

``--server`` runs it against an S3-compatible server already listening there (e.g.
SeaweedFS, which completes a multipart upload by reference, as S3 does; moto copies the
parts' bytes), its bucket made if missing.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from s3_faults import FaultInjectingProxy
from s3_server import BUCKET, S3Server

MIB = 1024 * 1024


SERVER_PIDS: dict[int, int] = {}
"""Port -> the process id of the moto server listening there (its CPU time is measured)."""


@contextlib.contextmanager
def moto_server() -> Iterator[S3Server]:
    """moto's S3 server in a process of its own on a free loopback port, with the bucket."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    SERVER_PIDS[port] = process.pid
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        server = S3Server("127.0.0.1", port)
        uri = server.uri().replace("region=", "allow_bucket_creation=true&region=")
        pafs.FileSystem.from_uri(uri)[0].create_dir(BUCKET)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def existing_server(endpoint: str) -> Iterator[S3Server]:
    """An S3-compatible server already running at ``endpoint``, with the bucket."""
    host, _, port = endpoint.rpartition(":")
    server = S3Server(host, int(port))
    uri = server.uri().replace("region=", "allow_bucket_creation=true&region=")
    pafs.FileSystem.from_uri(uri)[0].create_dir(BUCKET)
    yield server


def random_table(mib: int) -> pa.Table:
    """About ``mib`` MiB of Parquet: random int64 values, which do not compress."""
    rows = mib * MIB // 8
    return pa.table({"v": np.random.default_rng(mib).integers(0, 2**62, rows)})


class Commits:
    """The three ways to put one table on the server, each as (write, commit) steps."""

    def __init__(self, server: S3Server, proxy: FaultInjectingProxy, scratch: str) -> None:
        self.server = server
        self.proxy = proxy
        self.filesystem = server.filesystem()
        self.scratch = scratch
        self.requests: dict[str, str] = {}
        """Way -> the requests of its last commit."""
        self.publish_seconds: dict[str, list[float]] = {}
        """Way -> the server's time answering each of its commits' copy or complete."""

    def _sink_and_context(self) -> tuple[Any, Any, Any, str]:
        """A writing sink (to the server), a committing one (through the proxy), and the
        commit's context, for a fresh folder."""
        from flintlock.plugin_api import CheckpointStorage, CommitContext
        from flintlock.sinks.files import FileSink

        folder = f"bench-{uuid.uuid4().hex[:10]}"
        sink = FileSink(self.server.uri(f"{folder}/out"))
        committer = FileSink(self.server.uri(f"{folder}/out", endpoint=self.proxy.endpoint))
        storage = CheckpointStorage.from_uri(f"{self.scratch}/{folder}")
        context = CommitContext("bench", "run1", 1, storage, job_id="job1", sink_uid="out")
        committer.prepare_output(context)  # its run registered, as a job's driver does first
        return sink, committer, context, f"{BUCKET}/{folder}/out"

    def _commit(self, way: str, committer: Any, context: Any, committables: list[Any]) -> float:
        self.proxy.requests.clear()
        self.proxy.upstream_seconds.clear()
        started = time.perf_counter()
        committer.commit(context, committables)
        seconds = time.perf_counter() - started
        publish = ("CopyObject", "CompleteMultipartUpload")
        server = sum(self.proxy.upstream_seconds[name] for name in publish)
        self.publish_seconds.setdefault(way, []).append(server)
        operations = [operation for operation, _ in self.proxy.requests]
        self.requests[way] = " ".join(
            f"{name}{'x' + str(operations.count(name)) if operations.count(name) > 1 else ''}"
            for name in dict.fromkeys(operations)
        )
        return seconds

    def plain(self, table: pa.Table) -> tuple[float, float, str]:
        path = f"{BUCKET}/bench-{uuid.uuid4().hex[:10]}/plain.parquet"
        started = time.perf_counter()
        pq.write_table(table, path, filesystem=self.filesystem)
        return time.perf_counter() - started, 0.0, path

    def copy_commit(self, table: pa.Table) -> tuple[float, float, str]:
        _, committer, context, base = self._sink_and_context()
        staging = f"{base}/_staging-job1/run1-chk1-0-0-0.parquet"
        final = f"{base}/part-run1-chk1-0-0.parquet"
        started = time.perf_counter()
        pq.write_table(table, staging, filesystem=self.filesystem)
        size = self.filesystem.get_file_info(staging).size
        written = time.perf_counter()
        staged = {"staging": staging, "final": final, "rows": table.num_rows, "bytes": size}
        return written - started, self._commit("copy commit", committer, context, [staged]), final

    def multipart_commit(self, table: pa.Table) -> tuple[float, float, str]:
        from flintlock.plugin_api import SinkWriterContext, TaskInfo

        sink, committer, context, _ = self._sink_and_context()
        task = TaskInfo("bench", "one-input", 0, 1, run_id="run1", job_id="job1")
        started = time.perf_counter()
        transaction = sink.begin_transaction(SinkWriterContext(task, context.storage), 1)
        for batch in table.to_batches(max_chunksize=1 << 20):
            sink.write(transaction, batch)
        committables = sink.pre_commit(transaction)
        written = time.perf_counter()
        commit = self._commit("multipart commit", committer, context, committables)
        return written - started, commit, committables[0]["final"]

    def check(self, path: str, table: pa.Table) -> None:
        written = pq.read_table(path, filesystem=self.filesystem)
        expected = (table.num_rows, pc.sum(table["v"]).as_py())
        found = (written.num_rows, pc.sum(written["v"]).as_py())
        if found != expected:
            raise SystemExit(f"{path}: (rows, sum) {found}, not {expected}")
        self.drop(path)

    def drop(self, path: str) -> None:
        """Delete the run's folder (``bucket/bench-*``): the server keeps it in memory."""
        self.filesystem.delete_dir("/".join(path.split("/")[:2]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,8,32,128", help="file sizes in MiB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--server", help="host:port of a running S3-compatible server")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with (
        existing_server(args.server) if args.server else moto_server() as server,
        FaultInjectingProxy(server.endpoint) as proxy,
        tempfile.TemporaryDirectory() as scratch,
    ):
        commits = Commits(server, proxy, scratch)
        ways: dict[str, Callable[[pa.Table], tuple[float, float, str]]] = {
            "plain write": commits.plain,
            "copy commit": commits.copy_commit,
            "multipart commit": commits.multipart_commit,
        }
        print(
            f"{'MiB':>5} {'way':<18}{'write s':>9}{'commit s':>10}{'server copy/complete s':>24}"
            f"{'rest of commit s':>18}{'total s':>9}{'commit/plain':>14}{'total/plain':>13}"
            "  requests of the commit"
        )
        for mib in sizes:
            table = random_table(mib)
            for way in ways.values():  # warm-up, and each way's output checked
                commits.check(way(table)[2], table)
            samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in ways}
            for _ in range(args.runs):  # interleaved
                for name, way in ways.items():
                    write, commit, path = way(table)
                    server = commits.publish_seconds.get(name, [0.0])[-1]
                    samples[name].append((write, commit, server))
                    commits.drop(path)
            plain = statistics.median(w + c for w, c, _ in samples["plain write"])
            for name, runs in samples.items():
                write, commit, server = (statistics.median(r[i] for r in runs) for i in range(3))
                rest = statistics.median(c - p for _, c, p in runs)
                total = statistics.median(w + c for w, c, _ in runs)
                print(
                    f"{mib:>5} {name:<18}{write:>9.3f}{commit:>10.3f}{server:>24.3f}"
                    f"{rest:>18.3f}{total:>9.3f}{commit / plain:>13.2f}x{total / plain:>12.2f}x"
                    f"  {commits.requests.get(name, '')}"
                )


if __name__ == "__main__":
    main()
