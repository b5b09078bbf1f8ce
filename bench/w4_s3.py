"""Benchmark W4 on S3: W1's output through FileSink, DeltaSink and IcebergSink with the
job's checkpoints and every output on an S3 server, against each system's plain write of
the same rows to the same server, in one run (issue 34).

The server is moto's, in its own process on loopback (``bench/s3_commit.py``); flintlock
gets it as plain ``s3://bucket/...`` URIs and ``storage_options`` (credentials and
endpoint once). W4's job (``bench/w4.py``): ``--rows`` ids as available-now epochs of
``2 * --per-checkpoint`` ids, half of which pass W1's filter, parallelism 2. The
baselines: Spark computes the rows (``toArrow``), then

- ``files``: pyarrow writes as many Parquet files as flintlock does (two per checkpoint);
- ``delta``: ``deltalake.write_deltalake`` once;
- ``iceberg``: pyiceberg ``table.append`` once (a SQL catalog on a local SQLite file,
  its warehouse on S3, as the sink's).

``in line`` is flintlock with each checkpoint's commit between two epochs (the sink's
``commits_beside_next_epoch`` off), as before commits ran beside the next epoch.

Every output is read back by its system's reader and checked against the rows first.
Medians of interleaved runs after a warm-up. ``--cpu`` then runs flintlock and each
baseline again and prints the CPU seconds the whole machine and the S3 server's process
spent on each (medians): on 2 cores a run that keeps both busy is bound by CPU, and
every request costs the server's CPU as well as a round trip.

    python bench/w4_s3.py [--rows 10000000] [--per-checkpoint 1000000] [--runs 3]
                          [--sinks files,delta,iceberg] [--cpu]
                          [--server host:port [--server-pid PID]]

``--server`` runs it against an S3-compatible server already listening there (one
written in Go, whose requests cost less CPU than moto's Python: SeaweedFS, as in
``bench/s3_commit.py``); ``--server-pid`` names its process for ``--cpu``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import w4
from pyspark import cloudpickle
from s3_commit import SERVER_PIDS, existing_server, moto_server
from timing import local_session, timed

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.plugin_api import StorageOptions

cloudpickle.register_pickle_by_value(w4)  # workers cannot import bench/w4.py


class S3Targets:
    """Per system: a fresh sink on S3 for flintlock, its plain write there, a read back."""

    def __init__(self, server: Any, scratch: str, files: int) -> None:
        self.server = server
        self.scratch = scratch
        self.files = files
        """How many files the plain Parquet write makes: as many as flintlock's epochs do."""
        self.options = StorageOptions(server.storage_options())

    def uri(self, name: str) -> str:
        return str(self.server.plain_uri(f"w4-{name}-{uuid.uuid4().hex[:8]}"))

    def catalog(self) -> dict[str, str]:
        """A SQL catalog on a local SQLite file whose warehouse is a fresh S3 folder."""
        database = f"{self.scratch}/catalog-{uuid.uuid4().hex[:8]}.db"
        return {"type": "sql", "uri": f"sqlite:///{database}", "warehouse": self.uri("wh")}

    def sink(self, system: str, beside: bool = True) -> Any:
        """A fresh sink of ``system``; ``beside=False``: its commits run in line."""
        sink = self._new_sink(system)
        if not beside:
            sink.commits_beside_next_epoch = False
        return sink

    def _new_sink(self, system: str) -> Any:
        if system == "files":
            from flintlock.sinks.files import FileSink

            return FileSink(self.uri("files"))
        if system == "delta":
            from flintlock.sinks.delta import DeltaSink

            return DeltaSink(self.uri("delta"))
        from flintlock.sinks.iceberg import IcebergSink

        return IcebergSink(f"w4.t{uuid.uuid4().hex[:8]}", catalog=self.catalog())

    def run(self, spark: Any, rows: int, per_checkpoint: int, sink: Any) -> int:
        """W4's job into ``sink``, its checkpoints on S3 too; the epochs it ran."""
        env = StreamExecutionEnvironment(
            parallelism=2,
            spark=spark,
            checkpoint_dir=self.uri("chk"),
            storage_options=dict(self.options),
        )
        stream = env.from_sequence(end=rows, rows_per_epoch=2 * per_checkpoint)
        stream = stream.map_batch(w4.w1_rows, output_schema=w4.SCHEMA)
        stream = stream.map_batch(w4.w1.double_value, output_schema=w4.SCHEMA)
        stream.filter_batch(w4.w1.even_key).sink_to(sink, name="w4")
        result = env.execute(f"w4-{uuid.uuid4().hex[:8]}", trigger=EpochTrigger.available_now())
        return result.epochs

    def read_back(self, system: str, sink: Any) -> pa.Table:
        """What flintlock wrote through ``sink``, read by the system's own reader."""
        if system == "files":
            import pyarrow.dataset as ds

            filesystem, path = self.options.filesystem(sink.path)
            return ds.dataset(path, filesystem=filesystem, format="parquet").to_table()
        if system == "delta":
            import deltalake

            return deltalake.DeltaTable(
                sink.uri, storage_options=self.options.for_deltalake()
            ).to_pyarrow_table()
        from pyiceberg.catalog import load_catalog

        name, properties = sink.catalog
        catalog = load_catalog(name, **properties, **self.options.for_pyiceberg())
        return catalog.load_table(sink.table).scan().to_arrow()

    def plain_write(self, system: str, table: pa.Table) -> None:
        if system == "files":
            filesystem, folder = self.options.filesystem(self.uri("plain"))
            w4.write_parts(table, self.files, filesystem, folder)
        elif system == "delta":
            import deltalake

            deltalake.write_deltalake(
                self.uri("plain-delta"), table, storage_options=self.options.for_deltalake()
            )
        else:
            from pyiceberg.catalog import load_catalog

            catalog = load_catalog("plain", **self.catalog(), **self.options.for_pyiceberg())
            catalog.create_namespace_if_not_exists("w4")
            iceberg = catalog.create_table(f"w4.t{uuid.uuid4().hex[:8]}", schema=table.schema)
            iceberg.append(table)


def main() -> None:
    """Run each sink and its baseline on S3, interleaved, and print one table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--per-checkpoint", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sinks", default="files,delta,iceberg")
    parser.add_argument("--cpu", action="store_true", help="CPU seconds, machine and server")
    parser.add_argument("--server", help="host:port of a running S3 server (default: moto)")
    parser.add_argument("--server-pid", type=int, help="its process, for --cpu")
    args = parser.parse_args()
    spark = local_session(driver_memory="4g")
    scratch = tempfile.mkdtemp(prefix="flintlock-w4-s3-")
    in_memory = w4.output_frame(spark, args.rows).toArrow()
    files = 2 * -(-in_memory.num_rows // args.per_checkpoint)  # 2 subtasks per epoch
    systems = args.sinks.split(",")
    try:
        started_server = existing_server(args.server) if args.server else moto_server()
        with started_server as server:
            targets = S3Targets(server, scratch, files)
            variants: dict[str, Callable[[], Any]] = {}
            for system in systems:
                variants[f"{system}: flintlock on S3"] = lambda s=system: targets.run(
                    spark, args.rows, args.per_checkpoint, targets.sink(s)
                )
                variants[f"{system}: in line"] = lambda s=system: targets.run(
                    spark, args.rows, args.per_checkpoint, targets.sink(s, beside=False)
                )
                variants[f"{system}: baseline"] = lambda s=system: targets.plain_write(
                    s, w4.output_frame(spark, args.rows).toArrow()
                )
                variants[f"{system}: write only"] = lambda s=system: targets.plain_write(
                    s, in_memory
                )
            for work in variants.values():  # warm-up: JIT, Python workers, imports
                work()
            for system in systems:  # the rows, read back by the system's reader
                sink = targets.sink(system)
                epochs = targets.run(spark, args.rows, args.per_checkpoint, sink)
                written = targets.read_back(system, sink)
                w4.check(written, in_memory, f"{system} on S3 ({epochs} epochs)")
            started = time.perf_counter()
            figures = timed(args.runs, variants)
            if args.cpu:
                server_pid = args.server_pid or SERVER_PIDS[server.port]
                chosen = {n: w for n, w in variants.items() if "on S3" in n or "baseline" in n}
                cpu = cpu_seconds(args.runs, chosen, server_pid)
        print(
            f"W4 on S3 ({args.server or 'moto'}), {args.rows:,} input ids -> "
            f"{in_memory.num_rows:,} rows, a "
            f"checkpoint every {args.per_checkpoint:,} rows, parallelism 2, local[2], median "
            f"of {args.runs} ({time.perf_counter() - started:.0f} s)"
        )
        print(f"{'variant':<28}{'seconds':>10}{'rows/s':>14}{'vs baseline':>13}")
        for name, (seconds, _) in figures.items():
            baseline = figures[f"{name.split(':')[0]}: baseline"][0]
            print(
                f"{name:<28}{seconds:>10.2f}{in_memory.num_rows / seconds:>14,.0f}"
                f"{seconds / baseline:>12.2f}x"
            )
        if args.cpu:
            print(f"{'variant':<28}{'seconds':>10}{'machine CPU s':>15}{'S3 server CPU s':>17}")
            for name, (wall, machine, server_cpu) in cpu.items():
                print(f"{name:<28}{wall:>10.2f}{machine:>15.2f}{server_cpu:>17.2f}")
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def cpu_seconds(
    runs: int, variants: dict[str, Callable[[], Any]], server_pid: int
) -> dict[str, tuple[float, float, float]]:
    """Per variant, medians over interleaved runs: its seconds, the CPU seconds the whole
    machine was busy (``/proc/stat``) and those of the S3 server's process."""
    ticks = os.sysconf("SC_CLK_TCK")

    def machine() -> float:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        return (sum(fields) - fields[3] - fields[4]) / ticks  # all but idle and iowait

    def server() -> float:
        with open(f"/proc/{server_pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # its user and system time

    taken: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, work in variants.items():
            machine_before, server_before, started = machine(), server(), time.perf_counter()
            work()
            wall = time.perf_counter() - started
            taken[name].append((wall, machine() - machine_before, server() - server_before))
    medians: dict[str, tuple[float, float, float]] = {}
    for name, measured in taken.items():
        wall, busy, served = (statistics.median(column) for column in zip(*measured, strict=True))
        medians[name] = (wall, busy, served)
    return medians


if __name__ == "__main__":
    main()
