"""One driver per job, commits never replayed, a dead job that looks dead (issue 19):
the lease, the commit record, subsumed commits and the status, without Spark."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from acknowledgements import acknowledgement
from lease_race import race_for_the_lease

from flintlock.core.api.sink import CommitContext, TwoPhaseCommitSink
from flintlock.core.checkpoint.commit_log import CommitLog
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.job.client import job_status
from flintlock.core.job.lease import (
    JobLease,
    generation_path,
    generations,
    heartbeat_path,
    read_holder,
)
from flintlock.errors import CheckpointError, JobLeaseError, LeaseLostError


def job_folder(tmp_path: Path, name: str = "orders") -> JobFolder:
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path)), name)
    folder.open()
    return folder


def lease_of(folder: JobFolder, run_id: str, renew: float = 0.2) -> JobLease:
    return JobLease(folder.storage, folder.path, folder.job_name, run_id, renew_seconds=renew)


def write_holder(folder: JobFolder, generation: int | None = None, **fields: Any) -> Path:
    """The next generation of the lease, as another driver would create it."""
    now = time.time()
    document = {
        "job_name": folder.job_name,
        "run_id": "other",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "process_started": None,
        "acquired": now,
        "renewed": now,
        "ttl_seconds": 10.0,
        **fields,
    }
    if generation is None:
        generation = (generations(folder.storage, folder.path) or [0])[-1] + 1
    document["generation"] = generation
    path = Path(generation_path(folder.path, generation))
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def lease_files(folder: JobFolder) -> list[str]:
    return sorted(os.listdir(Path(folder.path, "_lease")))


# ---- the lease ----


def test_a_second_driver_is_refused_while_the_first_holds_the_lease(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    first, second = lease_of(folder, "run-1"), lease_of(folder, "run-2")
    first.acquire()
    try:
        with pytest.raises(JobLeaseError, match=r"already running: .* held by run run-1 \(pid"):
            second.acquire()
        time.sleep(0.5)  # renewals go on, and the first still holds it
        first.check("commits")
        holder = read_holder(folder.storage, folder.path)
        assert holder is not None and holder.run_id == "run-1" and holder.renewed > first._acquired
        assert (holder.generation, first.generation, first.took_over) == (1, 1, None)
    finally:
        first.release()
    assert read_holder(folder.storage, folder.path) is None  # released: generation 2 says so
    assert lease_files(folder) == ["000000000001.json", "000000000002.json"]
    second.acquire()  # released: the next driver takes it, and takes over from nobody
    assert (second.generation, second.took_over) == (3, None)
    second.release()


def test_of_drivers_starting_together_exactly_one_takes_the_lease(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    for round_number in range(20):
        leases = [lease_of(folder, f"r{round_number}-{i}") for i in range(4)]
        outcome = race_for_the_lease(leases)
        holders = [run for run, said in outcome.items() if said == "holds"]
        assert len(holders) == 1, outcome
        holder = read_holder(folder.storage, folder.path)
        assert holder is not None and holder.run_id == holders[0]
        for lease in leases:
            lease.release()


def test_a_lease_taken_over_fences_its_old_holder(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    lease = lease_of(folder, "run-1")
    lease.acquire()
    folder.lease = lease
    write_holder(folder, run_id="run-2")  # another driver took it over: generation 2
    with pytest.raises(LeaseLostError, match=r"taken over by run run-2.*stops before it commits"):
        folder.fence("commits checkpoint 4")
    with pytest.raises(LeaseLostError):
        folder.record_finished("run-1", 4, {})  # the result store is fenced too
    assert not Path(folder.path, "_result.json").exists()
    lease.release()
    holder = read_holder(folder.storage, folder.path)
    assert holder is not None and (holder.run_id, holder.generation) == ("run-2", 2)


def test_a_lease_whose_renewals_stopped_is_lost(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    stalled = lease_of(folder, "run-2", renew=0.05)
    stalled.acquire()
    stalled._stop.set()  # its renewals stop, as in a driver that hangs
    time.sleep(stalled.ttl_seconds + 0.1)
    with pytest.raises(LeaseLostError, match="not renewed for"):
        stalled.check("commits")
    stalled.release()


def test_a_dead_or_expired_holder_is_taken_over(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    write_holder(folder, run_id="killed", pid=int(dead.stdout))  # its process is gone
    lease = lease_of(folder, "run-1")
    lease.acquire()  # at once, though the lease is fresh
    assert lease.took_over is not None and "run killed" in lease.took_over
    assert not lease.old_holder_may_publish  # a dead process publishes nothing: no fence
    lease.release()
    write_holder(folder, run_id="elsewhere", host="another-host", renewed=time.time() - 11)
    lease.acquire()  # on another host: expired after its time to live
    lease.release()
    write_holder(folder, run_id="elsewhere", host="another-host")
    with pytest.raises(JobLeaseError, match="held by run elsewhere"):
        lease.acquire()


@pytest.mark.parametrize("damage", ["", "{", '{"run_id": 1}', "\x00\xff garbage"])
def test_a_damaged_lease_is_an_expired_one_taken_over_by_the_same_swap(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    folder = job_folder(tmp_path)
    first = lease_of(folder, "run-1")
    first.acquire()
    folder.record_running("run-1")
    first._stop.set()  # killed: its generation stays
    generation_path_ = Path(generation_path(folder.path, first.generation))
    generation_path_.write_text(damage)  # truncated or garbled on the storage
    assert job_status(folder)["status"] != "RUNNING"  # status reads it without failing
    second = lease_of(folder, "run-2")
    with caplog.at_level("WARNING", logger="flintlock.lease"):
        second.acquire()  # no live holder can be proven: taken over, and said so
    assert second.generation == 2 and "damaged" in (second.took_over or "")
    assert second.old_holder_may_publish  # nobody can say it is dead: the next id is fenced
    assert "takes the lease over from generation 1, whose file is damaged" in caplog.text
    folder.lease = second
    folder.fence("commits")  # it holds the lease
    second.release()


def test_a_stale_holder_cannot_publish_once_a_successor_fenced_its_next_checkpoint(
    tmp_path: Path,
) -> None:
    """The guarantee is the create-once publish, not the lease check: a driver paused
    after its check finds its checkpoint id taken, whoever got there first."""
    stale_folder = job_folder(tmp_path)
    stale = CheckpointCoordinator(stale_folder)
    stale_lease = lease_of(stale_folder, "staleeeeeeee")
    stale_lease.acquire()
    stale_folder.lease = stale_lease
    stale.commit(complete(stale, 1, "staleeeeeeee"), {"sink": RecordingSink()})
    stale_lease._stop.set()  # paused: no renewals
    successor_folder = job_folder(tmp_path)
    successor = CheckpointCoordinator(successor_folder)
    stale_holder_file = Path(generation_path(stale_folder.path, 1))
    expired = json.loads(stale_holder_file.read_text()) | {"host": "paused-host"}
    long_ago = time.time() - 60
    stale_holder_file.write_text(json.dumps(expired | {"acquired": long_ago, "renewed": long_ago}))
    Path(heartbeat_path(stale_folder.path, 1)).unlink()
    taker = lease_of(successor_folder, "successorrrr")
    taker.acquire()
    successor_folder.lease = taker
    assert taker.took_over is not None and taker.old_holder_may_publish  # on another host
    assert successor.fence_next("successorrrr") == 2  # the stale driver's next checkpoint
    stale_folder.lease = None  # as if its lease check had passed before the pause
    with pytest.raises(LeaseLostError, match=r"checkpoint 2 was already fenced by run succ"):
        complete(stale, 2, "staleeeeeeee")
    fence = json.loads(Path(successor.directory, "chk-2", "_metadata.json").read_text())
    assert (fence["kind"], fence["lease_generation"]) == ("fenced", 2)
    assert successor.latest().checkpoint_id == 1  # a fence is no checkpoint
    third = complete(successor, 3, "successorrrr")  # the successor goes on above it
    assert third.checkpoint_id == 3 and successor.highest_id() == 3
    with pytest.raises(LeaseLostError, match="checkpoint 3 was already completed by run succ"):
        complete(stale, 3, "staleeeeeeee")  # an id completed by another is never rewritten
    assert (
        json.loads(Path(successor.directory, "chk-3", "_metadata.json").read_text())["run_id"]
        == "successorrrr"
    )
    successor.retain(1)  # old checkpoints go; the fence stays for good
    assert sorted(os.listdir(successor.directory)) == ["chk-2", "chk-3"]
    taker.release()


def test_a_result_of_an_older_lease_generation_is_not_recorded(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    old = lease_of(folder, "run-1")
    old.acquire()
    folder.lease = old
    folder.record_running("run-1")
    old._stop.set()
    newer = job_folder(tmp_path)
    write_holder(newer, run_id="run-2", host="h", renewed=time.time())
    newer.lease = lease_of(newer, "run-2")
    newer.lease.generation = 2
    newer.lease._renewed_at = time.monotonic()
    newer.record_running("run-2")
    old.lost = None
    old.check = lambda action: None  # type: ignore[method-assign]  # paused after its check
    with pytest.raises(LeaseLostError, match=r"lease generation 2\) recorded the job's result"):
        folder.record_failed("run-1", RuntimeError("late"))
    assert folder.read_record().run_id == "run-2"


# ---- the commit record ----


class RecordingSink(TwoPhaseCommitSink):
    """Records every commit, in order, on the driver."""

    def __init__(self) -> None:
        self.commits: list[tuple[int, list[Any]]] = []

    def begin_transaction(self, context: Any, checkpoint_id: int) -> Any:
        return None

    def write(self, transaction: Any, batch: Any) -> None:
        pass

    def pre_commit(self, transaction: Any) -> list[Any]:
        return []

    def abort(self, transaction: Any) -> None:
        pass

    def commit(self, context: CommitContext, committables: list[Any]) -> None:
        self.commits.append((context.checkpoint_id, committables))


def complete(coordinator: CheckpointCoordinator, checkpoint_id: int, run_id: str = "run1") -> Any:
    ack = acknowledgement("v", 0, checkpoint_id, committables={"sink": [f"file-{checkpoint_id}"]})
    return coordinator.complete(checkpoint_id, run_id, False, [ack], {("v", 0)})


def test_committing_n_commits_the_earlier_pending_checkpoints_first(tmp_path: Path) -> None:
    coordinator = CheckpointCoordinator(job_folder(tmp_path))
    sink = RecordingSink()
    complete(coordinator, 1)
    coordinator.commit(coordinator.latest(), {"sink": sink})
    for checkpoint_id in (2, 3, 4):
        checkpoint = complete(coordinator, checkpoint_id)
    coordinator.commit(checkpoint, {"sink": sink})  # 2 and 3 were never committed
    assert sink.commits == [(n, [f"file-{n}"]) for n in (1, 2, 3, 4)]
    assert CommitLog(coordinator.folder).committed_ids() == [1, 2, 3, 4]
    coordinator.commit(checkpoint, {"sink": sink})  # again: only 4 (idempotent commit)
    assert [n for n, _ in sink.commits] == [1, 2, 3, 4, 4]


def test_a_start_behind_a_recorded_commit_is_refused_naming_the_file(tmp_path: Path) -> None:
    coordinator = CheckpointCoordinator(job_folder(tmp_path))
    sink = RecordingSink()
    for checkpoint_id in (1, 2, 3):
        coordinator.commit(complete(coordinator, checkpoint_id), {"sink": sink})
    metadata = Path(coordinator.directory, "chk-3", "_metadata.json")
    metadata.unlink()
    latest = coordinator.latest()
    assert latest is not None and latest.checkpoint_id == 2  # the older one is still there
    log = CommitLog(coordinator.folder)
    with pytest.raises(CheckpointError, match=rf"checkpoint 3 was committed .*{metadata} is miss"):
        log.check_resumable(latest.checkpoint_id, "this start")
    log.check_resumable(3, "this start")  # from 3 on: nothing replayed


def test_a_damaged_commit_record_names_its_file(tmp_path: Path) -> None:
    coordinator = CheckpointCoordinator(job_folder(tmp_path))
    coordinator.commit(complete(coordinator, 1), {"sink": RecordingSink()})
    entry = Path(coordinator.folder.path, "_commits", "chk-1.json")
    entry.write_text("{")
    with pytest.raises(CheckpointError, match=f"{entry} is not valid JSON"):
        CommitLog(coordinator.folder).last()
    Path(coordinator.folder.path, "_commits", "notes.txt").write_text("")
    with pytest.raises(CheckpointError, match=r"notes\.txt does not belong"):
        CommitLog(coordinator.folder).last()


# ---- status ----


def test_the_status_says_running_only_under_a_fresh_lease(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    lease = lease_of(folder, "run-1")
    lease.acquire()
    folder.record_running("run-1")
    assert job_status(folder)["status"] == "RUNNING"
    lease._stop.set()  # the driver is gone: SIGKILL leaves the lease file behind
    stale = time.time() - 30
    write_holder(folder, 1, run_id="run-1", host="another-host", acquired=stale, renewed=stale)
    Path(heartbeat_path(folder.path, 1)).unlink()
    status = job_status(folder)
    assert status["status"] == "NOT_RUNNING" and status["recorded_status"] == "RUNNING"
    assert status["since"] == pytest.approx(time.time() - 30, abs=2)
    folder.record_finished("run-1", 5, {"records_out": {"sink": 10}})
    status = job_status(folder)
    assert (status["status"], status["latest_checkpoint"]) == ("FINISHED", 5)
    assert status["result"] == {"records_out": {"sink": 10}}


# ---- nothing left behind ----


def test_folders_of_dead_runs_and_their_incomplete_snapshots_are_removed(
    tmp_path: Path,
) -> None:
    coordinator = CheckpointCoordinator(job_folder(tmp_path))
    complete(coordinator, 1)  # of run "run1", which is no run folder's name
    job = Path(coordinator.folder.path)
    kept, dead, current = "0123456789ab", "ba9876543210", "ffffffffffff"
    ack = acknowledgement("v", 0, 2)
    coordinator.complete(2, kept, False, [ack], {("v", 0)})
    for folder in (
        f"{kept}/chk-2/v/0-1",
        f"{kept}/chk-3/v/0-7",
        f"{kept}/tasks",
        f"{dead}/chk-3/v/0-2",
        f"{current}/chk-3/v/0-9",
        "results",
        "savepoints",
    ):
        (job / folder).mkdir(parents=True)
    removed = coordinator.remove_orphaned_snapshots(current)
    assert sorted(Path(p).relative_to(job).as_posix() for p in removed) == sorted(
        [dead, f"{kept}/chk-3", f"{kept}/tasks"]
    )
    left = sorted(p.relative_to(job).as_posix() for p in job.glob("*/chk-*"))
    assert left == sorted(
        ["checkpoints/chk-1", "checkpoints/chk-2", f"{current}/chk-3", f"{kept}/chk-2"]
    )
    assert (job / "results").is_dir() and (job / "savepoints").is_dir()  # not run folders
