"""Benchmark W4 on local Spark: W1's output through each exactly-once sink, a checkpoint
every 1M rows, against the plain write of the same rows by each system, in one run.

The rows: W1's map and filter (key, value*2 where key is even) over ``--rows`` input ids,
half of which pass, so 10M ids give 5M output rows. flintlock reads the ids as an
unbounded sequence, ``2 * --per-checkpoint`` per epoch (available-now: one checkpoint and
one commit per 1M output rows), and writes through FileSink, DeltaSink, IcebergSink and
PostgresSink (parallelism 2; PostgresSink also with ``visibility="subtask"``, the opt-in
per-subtask commit that writes the rows once). The baselines write the same rows in the
same run:

- ``parquet``: Spark computes them and writes them, ``df.write.parquet`` (parallelism 2);
- ``delta`` / ``iceberg`` / ``postgres``: Spark computes them (``toArrow``), then the
  system's own plain write: ``deltalake.write_deltalake``, pyiceberg ``table.append``,
  one ``COPY ... FROM STDIN`` (CSV written by pyarrow) in one transaction;
- ``files-s3``: FileSink on S3 (moto's server, in its own process on loopback, as
  bench/s3_commit.py starts it); the baseline is Spark computing the rows (``toArrow``),
  then pyarrow writing the same files (as many as flintlock writes: two per checkpoint)
  to the same server with ``pyarrow.parquet.write_table``.

Each sink's ratio is against its system's baseline; ``write only`` is the baseline's write
alone (rows already in memory). Medians of interleaved runs after a warm-up. The
PostgreSQL server is started like the tests' (tests/postgres_server.py).

    python bench/w4.py [--rows 10000000] [--per-checkpoint 1000000] [--runs 3]
                       [--sinks files,delta,iceberg,postgres,files-s3]
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import w1
from pyspark import cloudpickle
from timing import local_session, timed

cloudpickle.register_pickle_by_value(w1)  # workers cannot import examples/w1.py
SCHEMA = pa.schema([("key", pa.int64()), ("value", pa.float64())])


def w1_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    """W1's input columns from the sequence's ids: key and value as ``w1.w1_input``."""
    ids = batch.column("id")
    key = modulo(pc.multiply(ids, 2654435761), 10000)  # below 2**63 for 10**9 ids
    value = pc.divide(pc.cast(modulo(ids, 1000), pa.float64()), 10.0)
    return pa.record_batch([key, value], schema=SCHEMA)


def modulo(values: pa.Array, divisor: int) -> pa.Array:
    """``values % divisor`` for non-negative integers (pyarrow has no modulo kernel)."""
    return pc.subtract(values, pc.multiply(pc.divide(values, divisor), divisor))


def output_frame(spark: Any, rows: int) -> Any:
    """W1's output as a Spark DataFrame (the baselines' rows)."""
    from pyspark.sql import functions as F

    frame = w1.w1_input(spark, rows, partitions=2)
    return frame.select("key", (F.col("value") * 2.0).alias("value")).where("key % 2 = 0")


def flintlock_run(spark: Any, rows: int, per_checkpoint: int, sink: Any, scratch: str) -> int:
    """W1's output into ``sink`` as available-now epochs; the epochs (checkpoints) run."""
    from flintlock import EpochTrigger, StreamExecutionEnvironment

    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=scratch)
    stream = env.from_sequence(end=rows, rows_per_epoch=2 * per_checkpoint)
    stream = stream.map_batch(w1_rows, output_schema=SCHEMA)
    stream = stream.map_batch(w1.double_value, output_schema=SCHEMA)
    stream.filter_batch(w1.even_key).sink_to(sink, name="w4")
    result = env.execute(f"w4-{uuid.uuid4().hex[:8]}", trigger=EpochTrigger.available_now())
    return result.epochs


def write_parts(table: pa.Table, files: int, filesystem: Any, folder: str) -> None:
    """The plain write of ``table`` as ``files`` Parquet files of equal rows."""
    size = -(-table.num_rows // files)
    for number in range(files):
        part = table.slice(number * size, size)
        pq.write_table(part, f"{folder}/part-{number}.parquet", filesystem=filesystem)


class Targets:
    """Per system: a fresh sink for flintlock, its plain write, and a row count read back."""

    def __init__(self, scratch: str) -> None:
        self.scratch = scratch
        self.server: Any = None
        self.s3: Any = None
        self.s3_stop: Any = None
        self.s3_files = 10
        """How many files the plain write to S3 writes: as many as flintlock's epochs do."""

    def fresh(self, name: str) -> str:
        return f"{self.scratch}/{name}-{uuid.uuid4().hex[:8]}"

    def s3_uri(self, name: str) -> str:
        """A fresh folder on the S3 server (started at the first call)."""
        if self.s3 is None:
            from s3_commit import moto_server

            server = moto_server()
            self.s3, self.s3_stop = server.__enter__(), server.__exit__
        return str(self.s3.uri(f"w4-{name}-{uuid.uuid4().hex[:8]}"))

    def sink(self, system: str, visibility: str = "checkpoint") -> Any:
        if system == "files-s3":
            from flintlock.sinks.files import FileSink

            return FileSink(self.s3_uri("files"))
        if system == "files":
            from flintlock.sinks.files import FileSink

            return FileSink(self.fresh("files"))
        if system == "delta":
            from flintlock.sinks.delta import DeltaSink

            return DeltaSink(self.fresh("delta"))
        if system == "iceberg":
            from flintlock.sinks.iceberg import IcebergSink

            return IcebergSink(f"w4.t{uuid.uuid4().hex[:8]}", warehouse=f"{self.scratch}/warehouse")
        from flintlock.sinks.postgres import PostgresSink

        table = f"w4_{uuid.uuid4().hex[:8]}"
        return PostgresSink(self.conninfo(), table, schema=SCHEMA, visibility=visibility)

    def read_back(self, system: str, sink: Any) -> pa.Table:
        """What flintlock wrote through ``sink``, read by the system's own reader."""
        if system == "files":
            return pq.read_table(sink.path)
        if system == "files-s3":
            import pyarrow.dataset as ds
            import pyarrow.fs as pafs

            filesystem, path = pafs.FileSystem.from_uri(sink.path)
            return ds.dataset(path, filesystem=filesystem, format="parquet").to_table()
        if system == "delta":
            from delta_tables import read_delta

            return read_delta(sink.uri)
        if system == "iceberg":
            from pyiceberg.catalog.sql import SqlCatalog

            warehouse = f"{self.scratch}/warehouse"
            uri = f"sqlite:///{warehouse}/catalog.db"
            catalog = SqlCatalog("flintlock", uri=uri, warehouse=f"file://{warehouse}")
            return catalog.load_table(sink.table).scan().to_arrow()
        import psycopg

        with psycopg.connect(self.conninfo()) as connection:
            rows = connection.execute(f"SELECT key, value FROM {sink.table}").fetchall()
        return pa.table({"key": [r[0] for r in rows], "value": [r[1] for r in rows]})

    def plain_write(self, system: str, table: pa.Table) -> None:
        if system == "files-s3":
            import pyarrow.fs as pafs

            filesystem, folder = pafs.FileSystem.from_uri(self.s3_uri("plain"))
            write_parts(table, self.s3_files, filesystem, folder)
        elif system == "delta":
            import deltalake

            deltalake.write_deltalake(self.fresh("plain-delta"), table)
        elif system == "iceberg":
            from pyiceberg.catalog.sql import SqlCatalog

            catalog = SqlCatalog(
                "plain",
                uri=f"sqlite:///{self.scratch}/plain-catalog.db",
                warehouse=f"file://{self.scratch}/plain-warehouse",
            )
            catalog.create_namespace_if_not_exists("w4")
            iceberg = catalog.create_table(f"w4.t{uuid.uuid4().hex[:8]}", schema=table.schema)
            iceberg.append(table)
        elif system == "postgres":
            import psycopg

            name = f"plain_{uuid.uuid4().hex[:8]}"
            buffer = io.BytesIO()
            pacsv.write_csv(table, buffer, pacsv.WriteOptions(include_header=False))
            with psycopg.connect(self.conninfo()) as connection:
                connection.execute(f"CREATE TABLE {name} (key bigint, value double precision)")
                with connection.cursor().copy(f"COPY {name} FROM STDIN (FORMAT csv)") as copy:
                    copy.write(buffer.getvalue())

    def conninfo(self) -> str:
        if self.server is None:
            from postgres_server import start_server

            self.server = start_server(max_prepared_transactions=20)
        return self.server.conninfo()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.s3_stop is not None:
            self.s3_stop(None, None, None)


def check(written: pa.Table, reference: pa.Table, label: str) -> None:
    """Same rows count, same key and value sums as the rows Spark computed (pyarrow)."""
    sums = [
        (table.num_rows, pc.sum(table["key"]).as_py(), round(pc.sum(table["value"]).as_py(), 3))
        for table in (written, reference)
    ]
    if sums[0] != sums[1]:
        raise SystemExit(f"W4 {label}: wrote (rows, key sum, value sum) {sums[0]}, not {sums[1]}")
    print(f"checked {label}: {sums[0][0]:,} rows, the same sums as the reference")


def main() -> None:
    """Run each sink and its baseline, interleaved, and print one table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--per-checkpoint", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sinks", default="files,delta,iceberg,postgres")
    args = parser.parse_args()
    spark = local_session(driver_memory="4g")
    scratch = tempfile.mkdtemp(prefix="flintlock-w4-")
    targets = Targets(scratch)
    in_memory = output_frame(spark, args.rows).toArrow()
    output_rows = in_memory.num_rows
    targets.s3_files = 2 * -(-output_rows // args.per_checkpoint)  # 2 subtasks per epoch
    systems = args.sinks.split(",")
    variants: dict[str, Callable[[], Any]] = {}

    def subtask_sink() -> Any:
        return targets.sink("postgres", visibility="subtask")

    for system in systems:
        variants[f"{system}: flintlock sink"] = lambda s=system: flintlock_run(
            spark, args.rows, args.per_checkpoint, targets.sink(s), targets.fresh("chk")
        )
        if system == "postgres":  # the opt-in per-subtask visibility: the rows written once
            variants["postgres: visibility=subtask"] = lambda: flintlock_run(
                spark, args.rows, args.per_checkpoint, subtask_sink(), targets.fresh("chk")
            )
        if system == "files":
            variants["files: baseline"] = lambda: output_frame(spark, args.rows).write.parquet(
                targets.fresh("spark-parquet")
            )
        else:
            variants[f"{system}: baseline"] = lambda s=system: targets.plain_write(
                s, output_frame(spark, args.rows).toArrow()
            )
            variants[f"{system}: write only"] = lambda s=system: targets.plain_write(s, in_memory)
    try:
        for work in variants.values():  # warm-up: JIT, Python workers, imports
            work()
        checked = [(s, s, targets.sink(s)) for s in systems]
        if "postgres" in systems:
            checked.append(("postgres per subtask", "postgres", subtask_sink()))
        for label, system, sink in checked:  # the rows, read back by the system's reader
            epochs = flintlock_run(spark, args.rows, args.per_checkpoint, sink, targets.fresh("c"))
            check(targets.read_back(system, sink), in_memory, f"{label} ({epochs} epochs)")
        started = time.perf_counter()
        figures = timed(args.runs, variants)
        print(
            f"W4, {args.rows:,} input ids -> {output_rows:,} rows, a checkpoint every "
            f"{args.per_checkpoint:,} rows, parallelism 2, local[2], median of {args.runs} "
            f"({time.perf_counter() - started:.0f} s)"
        )
        print(f"{'variant':<28}{'seconds':>10}{'rows/s':>14}{'vs baseline':>13}")
        for name, (seconds, _) in figures.items():
            system = name.split(":")[0]
            baseline = figures[f"{system}: baseline"][0]
            print(
                f"{name:<28}{seconds:>10.2f}{output_rows / seconds:>14,.0f}"
                f"{seconds / baseline:>12.2f}x"
            )
    finally:
        targets.close()
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
