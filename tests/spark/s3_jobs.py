"""The unbounded test job (unbounded_jobs.py) with everything on a real S3 server: its
checkpoints and job folder, and three outputs — a FileSink folder, a Delta table and an
Iceberg table (SQL catalog on local SQLite, warehouse on S3) — each read back by its own
library. Used in-process by test_s3_pipelines.py and as a driver process of its own:

``python s3_jobs.py MODE SETTINGS``: SETTINGS is the JSON of ``S3Places``; MODE is
``killed`` (SIGKILLed once 2 epochs committed), ``mid-commit`` (SIGKILLed in the
Iceberg commit of checkpoint 4, after the Delta and FileSink ones), ``together`` (waits
for ``<local>/go``) or ``paused`` (stops itself after its lease check for checkpoint 3,
until SIGCONT); these two write the FileSink only, and a refused start prints its
flintlock error as the RESULT.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.fs as pafs
import unbounded_jobs
from unbounded_jobs import KEYS, RunningSumUntilTheEnd

from flintlock import WatermarkStrategy
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.delta import DeltaSink
from flintlock.sinks.files import FileSink
from flintlock.sinks.iceberg import IcebergSink

END = 1500
PER_EPOCH = 300
ICEBERG_TABLE = "flintlock.sums"


@dataclass(frozen=True)
class S3Places:
    """Where one test's job keeps everything: ``endpoint`` (host:port of the S3 server
    or of a proxy in front of it), ``folder`` (in the bucket) and ``local`` (a local
    folder for the Iceberg catalog's database and the test's markers)."""

    endpoint: str
    bucket: str
    folder: str
    local: str

    def uri(self, path: str) -> str:
        """A pyarrow URI of ``path`` under the folder (credentials and endpoint in it)."""
        options = f"endpoint_override={self.endpoint}&scheme=http&region=us-east-1"
        return f"s3://testing:testing@{self.bucket}/{self.folder}/{path}?{options}"

    def plain(self, path: str) -> str:
        """``s3://bucket/folder/path``, for the table libraries (settings apart)."""
        return f"s3://{self.bucket}/{self.folder}/{path}"

    def delta_options(self) -> dict[str, str]:
        """delta-rs's settings: this endpoint over HTTP, and log entries created by a
        conditional put (If-None-Match), safe for concurrent writers without a lock."""
        return {
            "AWS_ENDPOINT_URL": f"http://{self.endpoint}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
            "aws_conditional_put": "etag",
        }

    def iceberg_catalog(self) -> dict[str, str]:
        """A pyiceberg SQL catalog on local SQLite whose warehouse is on S3."""
        return {
            "name": "flintlock",
            "type": "sql",
            "uri": f"sqlite:///{self.local}/catalog.db",
            "warehouse": self.plain("warehouse"),
            "s3.endpoint": f"http://{self.endpoint}",
            "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing",
            "s3.region": "us-east-1",
        }


def build(
    spark: Any,
    places: S3Places,
    end: int | None = END,
    delta: type[DeltaSink] | None = DeltaSink,
    iceberg: type[IcebergSink] = IcebergSink,
    **options: Any,
) -> StreamExecutionEnvironment:
    """``PER_EPOCH`` ids per epoch up to ``end``, summed per ``id % KEYS``, into three
    sinks on S3 (only the FileSink if ``delta`` is None); ``options`` go to the
    environment (``lease_seconds``)."""
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=places.uri("chk"), **options
    )
    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    stream = env.from_sequence(end=end, rows_per_epoch=PER_EPOCH, watermark_strategy=strategy)
    sums = stream.key_by(lambda row: row["id"] % KEYS).process(RunningSumUntilTheEnd())
    sums.sink_to(FileSink(places.uri("files")), name="files")
    if delta is None:
        return env
    sums.sink_to(delta(places.plain("delta"), storage_options=places.delta_options()), name="delta")
    sums.sink_to(iceberg(ICEBERG_TABLE, catalog=places.iceberg_catalog()), name="iceberg")
    return env


class IcebergCommitDies(IcebergSink):
    """An IcebergSink whose driver dies (SIGKILL) in the commit of checkpoint 4, once:
    sinks commit in name order, so the Delta and FileSink commits of it are done."""

    marker = ""

    def commit(self, context: Any, committables: list[Any]) -> None:
        if context.checkpoint_id == 4 and not os.path.exists(self.marker):
            Path(self.marker).write_text("killed once")
            os.kill(os.getpid(), signal.SIGKILL)
        super().commit(context, committables)


def killed_after(epochs: int) -> Any:
    """A progress callback that SIGKILLs the driver once ``epochs`` epochs committed."""

    def progress(figures: dict[str, Any]) -> None:
        if figures["epoch"] == epochs:
            os.kill(os.getpid(), signal.SIGKILL)

    return progress


def file_rows(places: S3Places) -> list[dict[str, Any]]:
    """Every row the FileSink committed (pyarrow.dataset over its folder; staging and
    flintlock's notes, in folders starting with ``_``, are not part of it)."""
    filesystem, root = pafs.FileSystem.from_uri(places.uri("files"))
    dataset = ds.dataset(root, filesystem=filesystem, format="parquet")
    return dataset.to_table().to_pylist()


def delta_table(places: S3Places) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(places.plain("delta"), storage_options=places.delta_options())


def iceberg_table(places: S3Places) -> Any:
    from pyiceberg.catalog import load_catalog

    settings = places.iceberg_catalog()
    return load_catalog(settings.pop("name"), **settings).load_table(ICEBERG_TABLE)


def rows_of(places: S3Places) -> dict[str, list[dict[str, Any]]]:
    """Every committed row of each output, read by the output's own library (deltalake's
    dataset: its SQL engine keeps the GIL while it waits, and the S3 server of the
    tests runs in the same process)."""
    return {
        "files": file_rows(places),
        "delta": delta_table(places).to_pyarrow_dataset().to_table().to_pylist(),
        "iceberg": iceberg_table(places).scan().to_arrow().to_pylist(),
    }


def left_behind(places: S3Places, tables: bool = True) -> dict[str, list[str]]:
    """Per output, the data files on S3 that no commit made part of it: the FileSink's
    staged files, and table files neither the Delta log nor the Iceberg snapshot names
    (the tables left out if not ``tables``)."""
    staged = [f for f in files_under(places, "files") if "_staging" in f]
    if not tables:
        return {"files": staged}
    delta = {
        uri.removeprefix(places.plain("delta") + "/") for uri in delta_table(places).file_uris()
    }
    iceberg_files = iceberg_table(places).scan().plan_files()
    iceberg = {
        task.file.file_path.removeprefix(places.plain("warehouse") + "/") for task in iceberg_files
    }
    return {
        "files": staged,
        "delta": [
            f for f in files_under(places, "delta") if f.endswith(".parquet") and f not in delta
        ],
        "iceberg": [
            f for f in files_under(places, "warehouse") if "/data/" in f and f not in iceberg
        ],
    }


def files_under(places: S3Places, path: str) -> list[str]:
    """Every file under ``path`` (relative to the folder), relative to it, sorted."""
    filesystem, root = pafs.FileSystem.from_uri(places.uri(path))
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    infos = filesystem.get_file_info(selector)
    return sorted(i.path[len(root) + 1 :] for i in infos if i.type == pafs.FileType.File)


def run(mode: str, places: S3Places) -> dict[str, Any]:
    from job_scripts import start_session

    from flintlock.core.checkpoint.fences import PAUSE_AT, PAUSE_MARKER
    from flintlock.core.errors import FlintlockError

    spark = start_session("local[2]")
    if mode == "killed":
        build(spark, places, lease_seconds=0.5).execute("s3", progress=killed_after(2))
        return {"status": "not killed"}
    if mode == "mid-commit":
        IcebergCommitDies.marker = f"{places.local}/killed-mid-commit"
        build(spark, places, iceberg=IcebergCommitDies, lease_seconds=0.5).execute("s3")
        return {"status": "not killed"}
    if mode == "paused":
        os.environ[PAUSE_AT] = "publish-checkpoint:s3:3"
        os.environ[PAUSE_MARKER] = f"{places.local}/paused"
    if mode == "together":
        print("READY", flush=True)
        while not Path(places.local, "go").exists():
            time.sleep(0.01)
    try:  # the FileSink alone: which driver publishes is the question here
        result = build(spark, places, delta=None, lease_seconds=0.5).execute("s3")
    except FlintlockError as error:
        return {"refused": f"{type(error).__name__}: {error}"}
    return {"status": result.status, "run_id": result.run_id}


if __name__ == "__main__":
    from job_scripts import print_result
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    print_result(run(sys.argv[1], S3Places(**json.loads(sys.argv[2]))))
