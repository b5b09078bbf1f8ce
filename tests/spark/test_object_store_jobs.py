"""Unbounded jobs whose checkpoint folder is on an object store (issue 32): a real S3
server (moto's, on loopback) holds every file of the job folder; epochs restore, a
restart resumes, the CLI reads the job by its URI, and a savepoint's URI restores a job.
And a FileSink on S3 (issue 34), whose files are multipart uploads completed at commit:
a commit that fails halfway is completed by the next start, every row exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pyarrow.dataset as ds
import pytest
import unbounded_jobs
from pyspark import cloudpickle
from s3_server import BUCKET, S3Server
from unbounded_jobs import (
    KEYS,
    CommitFailsOnceAt,
    RunningSumUntilTheEnd,
    committed_rows,
    wait_for_epochs,
)

from flintlock import CommitError, WatermarkStrategy
from flintlock.cli import main
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.files import FileSink

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/

PER_EPOCH = 300


def s3_job(
    spark: Any,
    checkpoint_dir: str,
    out: Path,
    options: dict[str, str] | None = None,
    sink: FileSink | None = None,
) -> StreamExecutionEnvironment:
    """An endless sequence summed per ``id % KEYS`` into files (``out``, or ``sink``);
    checkpoints at the URI, opened with ``options`` (the environment's storage_options)
    if given."""
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=checkpoint_dir, storage_options=options
    )
    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    stream = env.from_sequence(rows_per_epoch=PER_EPOCH, watermark_strategy=strategy)
    keyed = stream.key_by(lambda row: row["id"] % KEYS).process(RunningSumUntilTheEnd())
    keyed.sink_to(sink or FileSink(str(out)), name="files")
    return env


def reference(count: int) -> dict[int, int]:
    """Plain Python over ids 0..count-1: each key's total."""
    totals: dict[int, int] = {}
    for i in range(count):
        totals[i % KEYS] = totals.get(i % KEYS, 0) + i
    return totals


def data_ids_and_totals(base: Path) -> tuple[list[int], dict[int, int]]:
    """The committed data rows' ids, sorted, and each key's last running total."""
    rows = [r for r in committed_rows(str(base)) if r["id"] >= 0]
    totals: dict[int, int] = {}
    for row in rows:
        totals[row["k"]] = max(totals.get(row["k"], 0), row["total"])
    return sorted(r["id"] for r in rows), totals


def test_an_unbounded_job_on_s3_resumes_exactly_once_and_the_cli_reads_it(
    spark: Any, s3: S3Server, s3_folder: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    checkpoint_dir = s3.uri(f"{s3_folder}/chk")
    client = s3_job(spark, checkpoint_dir, tmp_path / "out").execute_async("unbounded")
    wait_for_epochs(client, 3)  # each epoch restores the one before from S3
    client.stop()
    stopped = client.result()
    assert stopped.status == "STOPPED" and stopped.epochs >= 3
    # a URI a user passes back as it is: its scheme, without the credentials or options
    assert stopped.savepoint_path.startswith(f"s3://{BUCKET}/{s3_folder}/chk/unbounded/savepoints/")
    ids, _ = data_ids_and_totals(tmp_path)
    assert ids == list(range(PER_EPOCH * stopped.epochs))

    capsys.readouterr()
    assert main(["status", s3.uri(f"{s3_folder}/chk/unbounded")]) == 0
    status = capsys.readouterr().out
    assert status.startswith("job 'unbounded'  STOPPED") and f"run {stopped.run_id}" in status
    assert main(["checkpoints", "list", s3.uri(f"{s3_folder}/chk/unbounded")]) == 0
    listed = capsys.readouterr().out
    assert f"chk-{stopped.checkpoint_id}  unbounded  run {stopped.run_id}" in listed

    # a restart continues from the last checkpoint (the stop's savepoint), on S3
    client = s3_job(spark, checkpoint_dir, tmp_path / "out").execute_async("unbounded")
    wait_for_epochs(client, 2, after_run=stopped.run_id)
    client.stop()
    resumed = client.result()
    assert resumed.status == "STOPPED"
    ids, totals = data_ids_and_totals(tmp_path)
    count = PER_EPOCH * (stopped.epochs + resumed.epochs)
    assert ids == list(range(count))  # each row exactly once across both runs
    assert totals == reference(count)  # the restored sums went on


def test_a_savepoint_at_an_s3_uri_restores_a_new_job(
    spark: Any, s3: S3Server, s3_folder: str, tmp_path: Path
) -> None:
    options = s3.storage_options()  # plain s3:// URIs, the settings given once
    first = s3_job(spark, s3.plain_uri(f"{s3_folder}/chk"), tmp_path / "first" / "out", options)
    client = first.execute_async("first")
    wait_for_epochs(client, 2)
    savepoint = client.stop()
    stopped = client.result()
    assert savepoint.startswith(f"s3://{BUCKET}/") and stopped.savepoint_path == savepoint

    # the stop's answer restores as it is: a URI on the job's storage uses its settings
    second = s3_job(spark, s3.plain_uri(f"{s3_folder}/chk-2"), tmp_path / "second" / "out", options)
    client = second.execute_async("second", restore_from=savepoint)
    wait_for_epochs(client, 2)
    client.stop()
    resumed = client.result()
    ids, totals = data_ids_and_totals(tmp_path / "second")
    start, count = PER_EPOCH * stopped.epochs, PER_EPOCH * (stopped.epochs + resumed.epochs)
    assert ids == list(range(start, count))  # the source went on where the savepoint was
    assert totals == reference(count)  # and so did every key's sum


def test_an_unbounded_job_into_s3_files_completes_a_failed_commit_at_restart(
    spark: Any, s3: S3Server, s3_folder: str, tmp_path: Path
) -> None:
    """Checkpoint 2's commit completes one of its two uploads and fails (beside epoch 3,
    whose uploads are then left pending); the restart completes the other (the first is
    found completed, its ETag checked), aborts what epoch 3 and a killed attempt left in
    the job's staging folder, and goes on: every row once."""
    out = s3.uri(f"{s3_folder}/out")
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{s3.endpoint}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )

    def pending() -> list[str]:
        listed = client.list_multipart_uploads(Bucket=BUCKET, Prefix=f"{s3_folder}/")
        return sorted(upload["Key"] for upload in listed.get("Uploads", []))

    sink = CommitFailsOnceAt(out, str(tmp_path / "failed-once"), checkpoint_id=2)
    failing = s3_job(spark, str(tmp_path / "chk"), tmp_path, sink=sink).execute_async("s3-files")
    with pytest.raises(CommitError, match="failed to commit checkpoint 2"):
        failing.result()
    failed_run = failing.status()["run_id"]
    uploads = pending()
    assert len([key for key in uploads if "-chk2-" in key]) == 1  # not published yet
    assert [key for key in uploads if "-chk3-" in key] != []  # epoch 3 ran beside the commit
    markers = [  # checkpoint 2's two markers: they go once its whole commit is done
        key
        for key in (i["Key"] for i in client.list_objects_v2(Bucket=BUCKET)["Contents"])
        if key.startswith(f"{s3_folder}/out/_staging-") and "-chk2-" in key
    ]
    assert len(markers) == 2
    dead = f"{s3_folder}/out/part-deadrun-chk2-1-0.parquet"  # a killed attempt's upload
    client.create_multipart_upload(Bucket=BUCKET, Key=dead)
    dead_marker = f"{markers[0].rsplit('/', 1)[0]}/deadrun-chk2-1-7-0.parquet"
    client.put_object(Bucket=BUCKET, Key=dead_marker, Body=f'{{"key": "{dead}"}}'.encode())

    again = s3_job(spark, str(tmp_path / "chk"), tmp_path, sink=FileSink(out))
    restarted = again.execute_async("s3-files")
    wait_for_epochs(restarted, 2, after_run=failed_run)
    restarted.stop()
    resumed = restarted.result()
    assert resumed.status == "STOPPED"
    table = ds.dataset(f"{BUCKET}/{s3_folder}/out", filesystem=s3.filesystem()).to_table()
    ids = sorted(i for i in table.column("id").to_pylist() if i >= 0)
    assert ids == list(range(PER_EPOCH * (2 + resumed.epochs)))  # each row exactly once
    assert pending() == []  # the dead attempt's upload aborted, every other one completed
    keys = [i["Key"] for i in client.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert [key for key in keys if key.startswith(f"{s3_folder}/out/_staging-")] == []
