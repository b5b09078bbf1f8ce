"""A job whose every place is a plain ``s3://bucket/path`` URI and whose credentials and
endpoint are given once, as the environment's ``storage_options`` (issue 34): its
checkpoints (written by the tasks on the executors), its job folder and three sinks
(files, Delta, Iceberg) are on a real S3 server (moto's, on loopback); each table is read
back by its own library and equals a plain-Python reference, and the secret is in no
file the job wrote and in nothing it printed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from job_scripts import run_script
from pyiceberg.catalog import load_catalog
from s3_server import BUCKET, S3Server

from flintlock import StreamExecutionEnvironment
from flintlock.plugin_api import StorageOptions
from flintlock.sinks.delta import DeltaSink
from flintlock.sinks.files import FileSink
from flintlock.sinks.iceberg import IcebergSink

pytestmark = pytest.mark.slow

ROWS = 600
SCHEMA = pa.schema([("id", pa.int64()), ("square", pa.int64())])


def reference() -> list[tuple[int, int]]:
    return [(i, i * i) for i in range(ROWS)]


def test_one_set_of_storage_options_reaches_checkpoints_and_every_sink(
    spark: Any, s3: S3Server, s3_folder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    options = s3.storage_options(secret)
    catalog = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": s3.plain_uri(f"{s3_folder}/warehouse"),
    }
    env = StreamExecutionEnvironment(
        parallelism=2,
        spark=spark,
        checkpoint_dir=s3.plain_uri(f"{s3_folder}/chk"),
        storage_options=options,
    )
    stream = env.from_sequence(end=ROWS, rows_per_epoch=200).map(
        lambda row: {"id": row["id"], "square": row["id"] * row["id"]}, output_schema=SCHEMA
    )
    stream.sink_to(FileSink(s3.plain_uri(f"{s3_folder}/files")), name="files")
    stream.sink_to(DeltaSink(s3.plain_uri(f"{s3_folder}/delta")), name="delta")
    sink = IcebergSink("db.squares", catalog=catalog, schema=SCHEMA)
    stream.sink_to(sink, name="iceberg")
    result = env.execute("squares", progress=True)
    assert result.status == "FINISHED" and result.epochs == 3

    filesystem = StorageOptions(options).filesystem(s3.plain_uri())[0]
    files = ds.dataset(f"{BUCKET}/{s3_folder}/files", filesystem=filesystem, format="parquet")
    delta = deltalake.DeltaTable(
        s3.plain_uri(f"{s3_folder}/delta"), storage_options=StorageOptions(options).for_deltalake()
    )
    iceberg = load_catalog(sink.catalog[0], **catalog, **StorageOptions(options).for_pyiceberg())
    tables = {
        "files": files.to_table(),
        "delta": delta.to_pyarrow_table(),
        "iceberg": iceberg.load_table("db.squares").scan().to_arrow(),
    }
    for name, table in tables.items():
        rows = sorted(zip(table["id"].to_pylist(), table["square"].to_pylist(), strict=True))
        assert rows == reference(), name
    assert len(delta.history()) == 3  # one commit per checkpoint

    written = s3.filesystem().get_file_info(
        pa.fs.FileSelector(f"{BUCKET}/{s3_folder}", recursive=True)
    )
    job_files = [info.path for info in written if info.type == pa.fs.FileType.File]
    assert any("/chk/squares/" in path for path in job_files)  # the job folder is there
    leaked = [p for p in job_files if secret.encode() in s3.filesystem().open_input_file(p).read()]
    assert not leaked, leaked
    printed = capsys.readouterr()
    assert secret not in printed.out + printed.err
    assert secret not in repr(env.storage_options)


def test_spark_event_logs_keep_no_storage_secret(
    s3: S3Server, s3_folder: str, tmp_path: Path
) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    config = {"bucket": BUCKET, "folder": s3_folder, "options": s3.storage_options(secret)}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = run_script(Path(__file__).with_name("event_log_job.py"), tmp_path)
    assert result["status"] == "FINISHED"
    found = result["found"]
    assert found["events"] > 20  # the event log was written and read
    assert not found["plain"] and not found["in_properties"], found
