"""Savepoint and stop requests through a job's folder, and its status lines (no Spark)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from flintlock.core.checkpoint_storage import CheckpointStorage
from flintlock.core.job_control import JobControl, progress_line
from flintlock.core.job_errors import CheckpointError, JobControlError
from flintlock.core.job_folder import JobFolder


def control_of(tmp_path: Path) -> JobControl:
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path)), "orders")
    folder.open()
    return JobControl(folder)


def test_requests_are_taken_oldest_first_until_answered(tmp_path: Path) -> None:
    control = control_of(tmp_path)
    assert control.next_request() is None
    savepoint = control.request("savepoint")
    stop = control.request("stop", drain=True)
    assert control.next_request() == savepoint
    control.answer(savepoint, savepoint="/sp/1")
    assert control.next_request() == stop
    assert stop.describe() == "stop --drain"
    assert control.wait(savepoint, timeout=1)["savepoint"] == "/sp/1"


def test_a_waiting_requester_gets_the_answer_written_later(tmp_path: Path) -> None:
    control = control_of(tmp_path)
    request = control.request("stop")

    def job_master() -> None:
        time.sleep(0.2)
        control.answer(control.next_request(), savepoint="/sp/2")  # type: ignore[arg-type]

    threading.Thread(target=job_master).start()
    assert control.wait(request, timeout=10)["savepoint"] == "/sp/2"


def test_a_failed_request_and_a_missing_answer_are_errors(tmp_path: Path) -> None:
    control = control_of(tmp_path)
    failed = control.request("savepoint")
    control.answer(failed, error="OSError: disk full")
    with pytest.raises(JobControlError, match="the savepoint failed: OSError: disk full"):
        control.wait(failed, timeout=1)
    unanswered = control.request("stop")
    with pytest.raises(JobControlError, match="did not answer the stop request"):
        control.wait(unanswered, timeout=0.1)
    with pytest.raises(JobControlError, match="ended without answering"):
        control.wait(unanswered, timeout=10, alive=lambda: False)


def test_bad_and_damaged_requests_are_refused(tmp_path: Path) -> None:
    control = control_of(tmp_path)
    with pytest.raises(JobControlError, match="only a stop drains"):
        control.request("savepoint", drain=True)
    with pytest.raises(JobControlError, match="unknown request"):
        control.request("cancel")  # type: ignore[arg-type]
    damaged = Path(control.directory, "0001-x.json")
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"action": "explode"}')
    with pytest.raises(CheckpointError, match=r"0001-x\.json is damaged"):
        control.next_request()


def test_the_status_keeps_the_newest_epochs_and_prints_them(tmp_path: Path) -> None:
    control = control_of(tmp_path)
    epochs = [
        {
            "epoch": n,
            "checkpoint_id": n,
            "kind": "checkpoint",
            "final": n == 60,
            "seconds": 0.5,
            "records_in": {"source": 10 * n, "sink": 10 * n},
            "records_out": {"source": 10 * n, "sink": 10 * n},
            "checkpoint_bytes": 2048,
        }
        for n in range(1, 61)
    ]
    control.write_status({"status": "RUNNING", "epochs": epochs})
    status = control.read_status()
    assert status is not None
    assert [e["epoch"] for e in status["epochs"]] == list(range(11, 61))
    assert progress_line(status["epochs"][-1]) == (
        "epoch 60  chk-60 checkpoint (final)  0.50 s  records in -> out: sink 600 -> 600, "
        "source 600 -> 600  state 2.0 kB"
    )
