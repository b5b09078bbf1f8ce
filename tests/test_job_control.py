"""Savepoint and stop requests through a job's folder, and its status lines (no Spark).

A request goes to the run that holds the job's lease: these tests hold a real lease."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.job.client import job_status
from flintlock.core.job.control import JobControl, progress_line
from flintlock.core.job.lease import JobLease, generation_path, read_state
from flintlock.errors import CheckpointError, JobControlError
from flintlock.job_commands import describe_status

RUN = "run-a"


def control_of(tmp_path: Path) -> JobControl:
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path)), "orders")
    folder.open()
    return JobControl(folder)


@pytest.fixture
def control(tmp_path: Path) -> Iterator[JobControl]:
    """The control channel of job 'orders' while run RUN holds its lease."""
    control = control_of(tmp_path)
    lease = JobLease(control.storage, control.folder.path, "orders", RUN, renew_seconds=0.2)
    lease.acquire()
    yield control
    lease.release()


def test_requests_are_taken_oldest_first_until_answered(control: JobControl) -> None:
    assert control.next_request(RUN) is None
    savepoint = control.request("savepoint")
    stop = control.request("stop", drain=True)
    assert (savepoint.run_id, stop.run_id) == (RUN, RUN)
    assert control.next_request(RUN) == savepoint
    assert control.next_request("another-run") is None  # requests belong to their run
    control.answer(savepoint, savepoint="/sp/1")
    assert control.next_request(RUN) == stop
    assert stop.describe() == "stop --drain"
    assert control.wait(savepoint, timeout=1)["savepoint"] == "/sp/1"
    # the requester removed both files once it had the answer
    assert sorted(os.listdir(control.directory)) == [f"{stop.request_id}.json"]


def test_a_waiting_requester_gets_the_answer_written_later(control: JobControl) -> None:
    request = control.request("stop")

    def job_master() -> None:
        time.sleep(0.2)
        control.answer(control.next_request(RUN), savepoint="/sp/2")  # type: ignore[arg-type]

    threading.Thread(target=job_master).start()
    assert control.wait(request, timeout=10)["savepoint"] == "/sp/2"


def test_a_failed_request_and_a_missing_answer_are_errors(control: JobControl) -> None:
    failed = control.request("savepoint")
    control.answer(failed, error="OSError: disk full")
    with pytest.raises(JobControlError, match="the savepoint failed: OSError: disk full"):
        control.wait(failed, timeout=1)
    unanswered = control.request("stop")
    with pytest.raises(JobControlError, match="did not answer the stop request"):
        control.wait(unanswered, timeout=0.1)


def test_requests_to_a_job_not_running_are_refused_at_once(tmp_path: Path) -> None:
    control = control_of(tmp_path)
    started = time.monotonic()
    with pytest.raises(JobControlError, match=r"'orders' is not running \(never ran\)"):
        control.request("stop")
    control.folder.record_finished("run-0", 3, {})
    with pytest.raises(JobControlError, match=r"recorded FINISHED \(run run-0\)"):
        control.request("savepoint")
    assert time.monotonic() - started < 1.0
    assert not os.path.exists(control.directory)  # nothing left behind


def test_a_request_expires_with_its_run(tmp_path: Path) -> None:
    control = control_of(tmp_path)
    lease = JobLease(control.storage, control.folder.path, "orders", RUN, renew_seconds=0.2)
    lease.acquire()
    old = control.request("stop")
    answered = control.request("savepoint")
    control.answer(answered, savepoint="/sp/3")
    lease.release()
    started = time.monotonic()
    with pytest.raises(JobControlError, match=r"did not answer the stop request .*driver is gone"):
        control.wait(old, timeout=10)  # at once: the run it was sent to is gone
    assert time.monotonic() - started < 2
    # a requester that died left its files; a new run removes them and never acts on them
    lease = JobLease(control.storage, control.folder.path, "orders", "run-b", renew_seconds=0.2)
    lease.acquire()
    try:
        stale = Path(control.directory, "00000000000000000001-dead.json")
        stale.write_text('{"action": "stop", "drain": false, "run_id": "run-a"}')
        mine = control.request("savepoint")
        assert control.next_request("run-b") == mine  # never the old run's stop
        removed = control.expire_requests("run-b")
        assert sorted(Path(p).name for p in removed) == sorted(
            [stale.name, f"{answered.request_id}.json", f"{answered.request_id}.answer.json"]
        )
        assert os.listdir(control.directory) == [f"{mine.request_id}.json"]
    finally:
        lease.release()


def test_a_stop_to_a_run_that_just_finished_is_answered_by_its_end(
    control: JobControl,
) -> None:
    stop = control.request("stop")
    savepoint = control.request("savepoint")
    control.folder.lease = None
    control.folder.record_finished(RUN, 7, {})
    state = read_state(control.storage, control.folder.path)
    assert state is not None  # the run ended and released its lease before it saw the requests
    released = generation_path(control.folder.path, state.generation + 1)
    assert control.storage.create_json_once(released, {"released": True, "run_id": RUN})
    answer = control.wait(stop, timeout=10)
    assert answer == {"savepoint": f"{control.folder.checkpoints}/chk-7", "final": True}
    with pytest.raises(JobControlError, match="it ended FINISHED"):
        control.wait(savepoint, timeout=10)


def test_bad_and_damaged_requests_are_refused(control: JobControl) -> None:
    with pytest.raises(JobControlError, match="only a stop drains"):
        control.request("savepoint", drain=True)
    with pytest.raises(JobControlError, match="unknown request"):
        control.request("cancel")  # type: ignore[arg-type]
    damaged = Path(control.directory, "0001-x.json")
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"action": "explode"}')
    with pytest.raises(CheckpointError, match=r"0001-x\.json is damaged"):
        control.next_request(RUN)


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


def test_the_status_describes_one_run_and_the_jobs_latest_checkpoint(tmp_path: Path) -> None:
    """Run A completes checkpoints 1-3 and fails; run B starts: until B's first epoch the
    status is B's (no epochs of A), and both times the latest checkpoint is 3."""
    control = control_of(tmp_path)
    folder = control.folder
    coordinator = CheckpointCoordinator(folder)
    epochs = []
    for n in (1, 2, 3):
        coordinator.complete(n, "run-a", False, [], set())
        epochs.append(
            {
                "epoch": n,
                "checkpoint_id": n,
                "kind": "checkpoint",
                "seconds": 0.5,
                "records_out": {"source": 10},
                "checkpoint_bytes": 0,
                "time": time.time(),
            }
        )
        control.write_status(
            {"run_id": "run-a", "status": "RUNNING", "latest_checkpoint": n, "epochs": epochs}
        )
    folder.record_failed("run-a", RuntimeError("a task failed"))
    failed = job_status(folder)
    assert (failed["status"], failed["run_id"], failed["latest_checkpoint"]) == (
        "FAILED",
        "run-a",
        3,
    )
    assert [e["epoch"] for e in failed["epochs"]] == [1, 2, 3]
    assert describe_status(failed).startswith(
        "job 'orders'  FAILED  run run-a  latest checkpoint 3"
    )

    lease = JobLease(control.storage, folder.path, "orders", "run-b", renew_seconds=0.2)
    lease.acquire()
    try:
        folder.record_running("run-b")
        running = job_status(folder)
    finally:
        lease.release()
    assert (running["status"], running["run_id"], running["latest_checkpoint"]) == (
        "RUNNING",
        "run-b",
        3,
    )
    assert running["epochs"] == []  # run A's epochs are not run B's
    lines = describe_status(running).splitlines()
    assert len(lines) == 1 and lines[0].endswith("run run-b  latest checkpoint 3")
