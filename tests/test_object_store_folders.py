"""The job commands on a job folder in an object store (issue 32): ``flintlock status``,
``metrics`` and ``checkpoints`` take its URI and read it through pyarrow's S3 file system,
here against a real S3 server (moto's, on loopback), with no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest
from lease_race import race_for_the_lease
from s3_server import S3Server

from flintlock.cli import main
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.job.lease import JobLease, read_holder


def stopped_job(s3: S3Server, folder: str) -> JobFolder:
    """A job 'orders' whose folder on S3 records a stopped run."""
    job = JobFolder(CheckpointStorage.from_uri(s3.uri(f"{folder}/chk")), "orders")
    job.open()
    job.record_stopped("run-7", 4, None, {"records_out": {"files": 1200}})
    return job


def test_status_reads_a_job_folder_given_as_an_s3_uri(
    s3: S3Server, s3_folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_job(s3, s3_folder)
    assert main(["status", s3.uri(f"{s3_folder}/chk/orders")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job 'orders'  STOPPED  run run-7  latest checkpoint 4")
    assert "records out files 1,200" in out
    by_name = ["status", "orders", "--checkpoint-dir", s3.uri(f"{s3_folder}/chk")]
    assert main(by_name) == 0
    assert capsys.readouterr().out == out


def test_job_commands_on_s3_uris_fail_as_one_line_naming_the_folder(
    s3: S3Server, s3_folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_job(s3, s3_folder)
    assert main(["metrics", s3.uri(f"{s3_folder}/chk/orders")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("flintlock: error: job 'orders' has no metrics in ")
    assert f"{s3_folder}/chk/orders/metrics" in error
    assert main(["status", s3.uri(f"{s3_folder}/chk/nobody")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("flintlock: error: s3://") and "is not a job folder" in error
    assert main(["status", "nowhere://bucket/job"]) == 1
    assert "names no file system pyarrow can open" in capsys.readouterr().err


def test_report_reads_a_job_folder_given_as_an_s3_uri(
    s3: S3Server, s3_folder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_job(s3, s3_folder)
    page = tmp_path / "report.html"
    assert main(["report", s3.uri(f"{s3_folder}/chk/orders"), "-o", str(page)]) == 0
    assert capsys.readouterr().out == f"{page}: job 'orders', 0 epochs, 0 failures\n"
    assert "orders" in page.read_text()


def test_on_s3_the_lease_and_checkpoints_are_created_once_by_conditional_writes(
    s3: S3Server, s3_folder: str
) -> None:
    """If-None-Match on a real S3 API: of drivers starting together exactly one takes
    the lease, and a second create of a file finds it there (nothing overwritten)."""
    storage = CheckpointStorage.from_uri(s3.uri(f"{s3_folder}/chk"))
    folder = JobFolder(storage, "orders")
    folder.open()
    path = f"{folder.path}/probe.json"
    assert storage.create_json_once(path, {"n": 1}) is True
    assert storage.create_json_once(path, {"n": 2}) is False
    assert storage.read_json(path) == {"n": 1}
    for round_number in range(3):
        leases = [
            JobLease(storage, folder.path, "orders", f"r{round_number}-{i}", renew_seconds=5)
            for i in range(3)
        ]
        outcome = race_for_the_lease(leases)
        assert sum(said == "holds" for said in outcome.values()) == 1, outcome
        holder = read_holder(storage, folder.path)
        assert holder is not None and outcome[holder.run_id] == "holds"
        for lease in leases:
            lease.release()
