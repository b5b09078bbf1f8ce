"""FileSink on S3 (issue 34): each file is written under its final key as a multipart
upload and published at commit by one CompleteMultipartUpload, without copying a byte.
Driven through the harness or the sink's 2PC methods against a real S3 server (moto's,
on loopback), through a proxy that counts every request by its S3 operation; no Spark."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from s3_faults import FaultInjectingProxy
from s3_server import BUCKET, S3Server

from flintlock import PluginError, SinkOutputError, StreamExecutionEnvironment
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.datastream import environment
from flintlock.core.task_info import TaskInfo
from flintlock.errors import CommittableError
from flintlock.operators.sink import TwoPhaseCommitSinkOperator
from flintlock.plugin_api import CommitContext, SinkWriterContext
from flintlock.sinks.files import FileSink
from flintlock.sinks.files_s3 import MIN_PART_SIZE, multipart_etag
from flintlock.testing import OneInputHarness

SPARK_REACHED = "execute() reached the Spark session"


def client(s3: S3Server) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=f"http://{s3.endpoint}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def pending_uploads(s3: S3Server, prefix: str) -> list[str]:
    """Keys of the multipart uploads under ``prefix`` neither completed nor aborted."""
    listed = client(s3).list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
    return sorted(upload["Key"] for upload in listed.get("Uploads", []))


def keys_under(s3: S3Server, prefix: str) -> list[str]:
    listed = client(s3).list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def read_rows(s3: S3Server, folder: str) -> pa.Table:
    """What a reader of the folder sees (pyarrow skips ``_`` names), sorted by ``v``."""
    dataset = ds.dataset(f"{BUCKET}/{folder}", filesystem=s3.filesystem(), format="parquet")
    table = dataset.to_table()
    return table.sort_by("v") if table.num_rows else table


def values(count: int, start: int = 0) -> pa.RecordBatch:
    return pa.record_batch({"v": pa.array(range(start, start + count), pa.int64())})


def data_requests(s3_proxy: FaultInjectingProxy) -> list[str]:
    """The operations of the requests the proxy saw for data files (``part-*``)."""
    return [operation for operation, path in s3_proxy.requests if "/part-" in path]


def harness_into(sink: FileSink, *batches: pa.RecordBatch) -> OneInputHarness:
    harness = OneInputHarness(TwoPhaseCommitSinkOperator(sink, name="files"))
    for batch in batches:
        harness.process_batch(batch)
    return harness


def test_rows_are_invisible_until_commit_which_completes_uploads_without_copying(
    s3: S3Server, s3_folder: str, s3_proxy: FaultInjectingProxy
) -> None:
    sink = FileSink(s3.uri(f"{s3_folder}/out", endpoint=s3_proxy.endpoint))
    harness = harness_into(sink, values(1000), values(500, start=1000))
    harness.complete(checkpoint_id=1)
    assert harness.acknowledgement is not None
    [file] = harness.acknowledgement.committables["files"]
    assert file["key"] == f"{s3_folder}/out/part-local-chk1-0-0.parquet"  # its final name
    assert pending_uploads(s3, s3_folder) == [file["key"]]
    assert read_rows(s3, f"{s3_folder}/out").num_rows == 0  # nothing visible yet
    assert [k for k in keys_under(s3, s3_folder) if "/part-" in k] == []

    s3_proxy.requests.clear()
    harness.commit(sink)
    assert data_requests(s3_proxy) == ["ListParts", "CompleteMultipartUpload"]  # no copy
    assert not any(op in ("CopyObject", "UploadPartCopy") for op, _ in s3_proxy.requests)
    expected = pa.table({"v": pa.array(range(1500), pa.int64())})
    assert read_rows(s3, f"{s3_folder}/out").equals(expected)
    assert pending_uploads(s3, s3_folder) == []
    assert not any("/_staging-" in key for key in keys_under(s3, s3_folder))  # markers gone

    s3_proxy.requests.clear()
    harness.commit(sink)  # the driver died after the commit: it runs again, changes nothing
    assert not any(op in ("CopyObject", "PutObject", "UploadPart") for op, _ in s3_proxy.requests)
    assert read_rows(s3, f"{s3_folder}/out").equals(expected)
    assert sink.committed_files() == [f"{BUCKET}/{file['key']}"]


def test_a_file_larger_than_a_part_is_uploaded_in_parts_and_round_trips(
    s3: S3Server, s3_folder: str
) -> None:
    sink = FileSink(s3.uri(f"{s3_folder}/out"), part_size=MIN_PART_SIZE)
    rows = 1_600_000  # about 12.8 MB of Parquet: random values do not compress
    random = pa.array(np.random.default_rng(7).integers(0, 2**62, rows), pa.int64())
    harness = harness_into(sink, pa.record_batch({"v": random}))
    harness.complete(checkpoint_id=1)
    assert harness.acknowledgement is not None
    [file] = harness.acknowledgement.committables["files"]
    sizes = [part["bytes"] for part in file["parts"]]
    assert len(sizes) == 3 and all(size >= MIN_PART_SIZE for size in sizes[:-1])
    assert sum(sizes) == file["bytes"] and file["rows"] == rows
    harness.commit(sink)
    head = client(s3).head_object(Bucket=BUCKET, Key=file["key"])
    assert head["ETag"].strip('"') == multipart_etag(file["parts"])
    assert head["ContentLength"] == file["bytes"]
    assert read_rows(s3, f"{s3_folder}/out").equals(pa.table({"v": random}).sort_by("v"))


def test_a_canceled_task_aborts_its_upload(s3: S3Server, s3_folder: str) -> None:
    sink = FileSink(s3.uri(f"{s3_folder}/out"))
    harness = harness_into(sink, values(100))
    started = [f"{s3_folder}/out/part-local-chk1-0-0.parquet"]
    deadline = time.monotonic() + 10  # the upload is created in the background
    while pending_uploads(s3, s3_folder) != started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pending_uploads(s3, s3_folder) == started
    harness.cancel()
    assert pending_uploads(s3, s3_folder) == []
    assert keys_under(s3, s3_folder) == []  # no data, no marker


def writer(sink: FileSink, job_id: str, run_id: str, subtask: int, attempt: int) -> Any:
    """A transaction of checkpoint 1 of ``job_id``'s subtask, with 100 rows written."""
    task = TaskInfo(
        "files",
        "one-input",
        subtask_index=subtask,
        parallelism=2,
        attempt_id=attempt,
        run_id=run_id,
        job_id=job_id,
    )
    storage = CheckpointStorage.from_uri("/tmp")
    transaction = sink.begin_transaction(SinkWriterContext(task, storage), 1)
    sink.write(transaction, values(100, start=100 * subtask))
    transaction.upload.created.result()  # the upload is created in the background: now
    return transaction


def test_a_start_aborts_the_jobs_unreferenced_uploads_never_another_jobs(
    s3: S3Server, s3_folder: str, tmp_path: Path
) -> None:
    sink = FileSink(s3.uri(f"{s3_folder}/out"), mode="append")
    kept = sink.pre_commit(writer(sink, "job-a", "run1", subtask=0, attempt=0))
    writer(sink, "job-a", "run1", subtask=1, attempt=1)  # killed: no pre-commit, no abort
    writer(sink, "job-a", "run1", subtask=0, attempt=2)  # a killed second attempt, same key
    writer(sink, "job-b", "run2", subtask=0, attempt=0)  # another job's, pending
    out = f"{s3_folder}/out"
    assert pending_uploads(s3, s3_folder) == sorted(
        [f"{out}/part-run1-chk1-0-0.parquet"] * 2
        + [f"{out}/part-run1-chk1-1-0.parquet", f"{out}/part-run2-chk1-0-0.parquet"]
    )
    storage = CheckpointStorage.from_uri(str(tmp_path))
    context = CommitContext("a", "run1", 1, storage, job_id="job-a")
    sink.abort_uncommitted(context, kept)
    assert pending_uploads(s3, s3_folder) == [
        f"{out}/part-run1-chk1-0-0.parquet",  # the kept one
        f"{out}/part-run2-chk1-0-0.parquet",  # job b's
    ]
    sink.commit(context, kept)
    assert read_rows(s3, out).equals(pa.table({"v": pa.array(range(100), pa.int64())}))
    assert pending_uploads(s3, s3_folder) == [f"{out}/part-run2-chk1-0-0.parquet"]

    refusing = FileSink(s3.uri(f"{s3_folder}/out"))  # mode='error' sees job b's pending files
    with pytest.raises(SinkOutputError, match="already holds data"):
        refusing.prepare_output(CommitContext("c", "run3", 1, storage, job_id="job-c"))
    other_path = FileSink(s3.uri(f"{s3_folder}/other"))
    writer(other_path, "job-b", "run2", subtask=0, attempt=0)
    with pytest.raises(SinkOutputError, match="pending files of another job"):
        other_path.prepare_output(CommitContext("c", "run3", 1, storage, job_id="job-c"))


def test_a_commit_that_finds_the_upload_gone_checks_the_object(
    s3: S3Server, s3_folder: str, tmp_path: Path
) -> None:
    sink = FileSink(s3.uri(f"{s3_folder}/out"))
    storage = CheckpointStorage.from_uri(str(tmp_path))
    context = CommitContext("a", "run1", 1, storage, job_id="job-a")
    [file] = sink.pre_commit(writer(sink, "job-a", "run1", subtask=0, attempt=0))
    sink.commit(context, [file])
    client(s3).put_object(Bucket=BUCKET, Key=file["key"], Body=b"someone else's bytes")
    with pytest.raises(CommittableError) as replaced:
        sink.commit(context, [file])
    message = str(replaced.value)
    assert f"s3://{BUCKET}/{file['key']} is not the one written" in message
    assert "ETag" in message and "new_run=True" in message

    [lost] = sink.pre_commit(writer(sink, "job-a", "run1", subtask=1, attempt=0))
    client(s3).abort_multipart_upload(Bucket=BUCKET, Key=lost["key"], UploadId=lost["upload_id"])
    with pytest.raises(CommittableError, match="is gone and was never completed") as gone:
        sink.commit(context, [lost])
    assert f"s3://{BUCKET}/{lost['key']}" in str(gone.value)


@pytest.mark.parametrize("size", [MIN_PART_SIZE - 1, 0, True, 8.0])
def test_a_part_size_s3_refuses_is_refused(s3: S3Server, size: object) -> None:
    with pytest.raises(SinkOutputError, match="part_size must be an int of 5242880 bytes"):
        FileSink(s3.uri("out"), part_size=size)  # type: ignore[arg-type]


def test_file_sink_on_s3_without_boto3_is_refused_before_spark(
    s3: S3Server, s3_folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def spark_would_start(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{SPARK_REACHED}: the check came too late")

    monkeypatch.setattr(environment, "active_or_local_session", spark_would_start)
    monkeypatch.setitem(sys.modules, "boto3", None)  # as if the s3 extra were not installed
    env = StreamExecutionEnvironment(parallelism=1, checkpoint_dir=str(tmp_path / "chk"))
    env.from_collection([{"v": 1}]).sink_to(FileSink(s3.uri(f"{s3_folder}/out")), name="out")
    with pytest.raises(PluginError, match=r"pip install 'flintlock\[s3\]'") as refused:
        env.execute("load")
    assert "FileSink on S3" in str(refused.value)
    assert keys_under(s3, s3_folder) == []
