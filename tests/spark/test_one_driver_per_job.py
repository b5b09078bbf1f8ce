"""Exactly once across drivers and a job's checkpoint history (issue 19), judged from
outside on real local Spark: unbounded jobs into a FileSink, every row checked against
the sequence's ids (a plain Python reference)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import unbounded_jobs
from driver_jobs import END, SIGINT_END
from pyspark import cloudpickle
from unbounded_jobs import KEYS, RunningSumUntilTheEnd, build, committed_rows, wait_for_epochs

from flintlock.cli import main
from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import FlintlockError
from flintlock.core.job.client import JobClient
from flintlock.core.job.control import JobControl
from flintlock.core.job.lease import generation_path, read_holder, read_state
from flintlock.errors import CheckpointError, CommitError, JobControlError, LeaseLostError

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/

HERE = Path(__file__).parent
SCRIPT = HERE / "driver_jobs.py"


def data_ids(base: str) -> list[int]:
    """The sequence ids committed (timer rows, id -1, left out), sorted."""
    return sorted(r["id"] for r in committed_rows(base) if r["id"] >= 0)


def duplicates(ids: list[int]) -> dict[int, int]:
    return {i: n for i, n in Counter(ids).items() if n > 1}


def result_record(base: str, job: str) -> dict[str, Any]:
    return json.loads(Path(base, "chk", job, "_result.json").read_text())


def staged_files(base: str) -> list[str]:
    return sorted(str(p) for p in Path(base, "out").glob("_staging-*/*"))


def driver(mode: str, base: str, **popen: Any) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": str(HERE)}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), mode, base],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        **popen,
    )


def result_of(process: subprocess.Popen[str], timeout: float = 300) -> dict[str, Any]:
    out, err = process.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert process.returncode == 0 and lines, out[-2000:] + err[-4000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


# ---- one driver per job ----


def test_of_two_drivers_started_together_one_runs_the_other_is_refused(tmp_path: Path) -> None:
    base = str(tmp_path)
    drivers = [driver("together", base), driver("together", base)]
    for process in drivers:  # both Spark sessions are up before either starts the job
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("READY"):
                break
    Path(base, "go").touch()
    results = [result_of(process) for process in drivers]
    ran = [r for r in results if "status" in r]
    refused = [r["refused"] for r in results if "refused" in r]
    assert len(ran) == 1 and len(refused) == 1, results
    assert ran[0]["status"] == "FINISHED"
    assert refused[0].startswith("JobLeaseError: job 'unbounded' is ")  # running / starting
    assert "pid" in refused[0] and "on host" in refused[0]  # it names the holder
    ids = data_ids(base)
    assert ids == list(range(END)), duplicates(ids)
    record = result_record(base, "unbounded")
    assert (record["status"], record["run_id"]) == ("FINISHED", ran[0]["run_id"])


def test_a_driver_whose_lease_is_taken_over_commits_nothing_more(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    job = tmp_path / "chk" / "unbounded"
    intruder: dict[str, Any] = {}

    def take_over_after_two_epochs(figures: dict[str, Any]) -> None:
        if figures["epoch"] == 2:  # another driver takes the lease over (it thought ours gone)
            state = read_state(CheckpointStorage.from_uri(str(job)), str(job))
            assert state is not None and state.holder is not None
            path = Path(generation_path(str(job), state.generation + 1))
            holder = asdict(state.holder) | {"generation": state.generation + 1}
            holder |= {"run_id": "intruder", "host": "elsewhere", "renewed": time.time() + 3600}
            path.write_text(json.dumps(holder))
            intruder.update(path=path, document=holder)

    env = build(spark, base, end=3000, lease_seconds=0.2)
    with pytest.raises(LeaseLostError, match="taken over by run intruder") as failure:
        env.execute("unbounded", progress=take_over_after_two_epochs)
    assert "stops before it completes the checkpoint 3" in str(failure.value)
    assert data_ids(base) == list(range(600))  # nothing after the takeover was published
    record = result_record(base, "unbounded")
    assert record["status"] == "RUNNING"  # the result store is the new holder's, untouched
    holder = read_holder(CheckpointStorage.from_uri(str(job)), str(job))
    assert holder is not None and holder.run_id == "intruder"  # and so is the lease

    gone = intruder["document"] | {"acquired": 0.0, "renewed": 0.0}
    intruder["path"].write_text(json.dumps(gone))  # the intruder is gone: taken over
    result = build(spark, base, end=3000).execute("unbounded")
    assert result.status == "FINISHED"
    ids = data_ids(base)
    assert ids == list(range(3000)), duplicates(ids)
    # the fenced run's snapshots of checkpoint 3, never completed, went at the restart; the
    # taker fenced checkpoint 3 (the intruder's next) and kept the fence
    fence = json.loads((job / "checkpoints" / "chk-3" / "_metadata.json").read_text())
    assert (fence["kind"], fence["run_id"]) == ("fenced", result.run_id)
    snapshots = sorted(p.relative_to(job).as_posix() for p in job.glob("*/chk-*") if p.is_dir())
    final = f"chk-{result.checkpoint_id}"
    expected = ["checkpoints/chk-3", f"checkpoints/{final}", f"{result.run_id}/{final}"]
    assert snapshots == sorted(expected)


def test_a_driver_whose_lease_is_taken_over_before_a_savepoint_stops_there(
    spark: Any, tmp_path: Path
) -> None:
    """A savepoint request's epoch whose publish finds the lease taken over ends the run
    with the LeaseLostError, as a checkpoint's does: a failed savepoint fails only its
    request while the run may go on, and this one may not (the S3 chaos suite, seed 303:
    a stale driver ran another epoch from a checkpoint its successor had removed)."""
    base = str(tmp_path)
    job = tmp_path / "chk" / "unbounded"
    asked: list[str] = []

    def ask_then_take_over(figures: dict[str, Any]) -> None:
        if figures["epoch"] == 2:  # a savepoint is asked, then the lease is taken over
            control = JobControl(JobClient(f"{base}/chk", "unbounded")._folder())
            asked.append(control.request("savepoint").request_id)
            state = read_state(CheckpointStorage.from_uri(str(job)), str(job))
            assert state is not None and state.holder is not None
            path = Path(generation_path(str(job), state.generation + 1))
            holder = asdict(state.holder) | {"generation": state.generation + 1}
            holder |= {"run_id": "intruder", "host": "elsewhere", "renewed": time.time() + 3600}
            path.write_text(json.dumps(holder))

    env = build(spark, base, end=3000, lease_seconds=0.2)
    with pytest.raises(LeaseLostError, match="taken over by run intruder") as failure:
        env.execute("unbounded", progress=ask_then_take_over)
    assert "stops before it completes the savepoint 3" in str(failure.value)
    assert asked and data_ids(base) == list(range(600))  # nothing after the takeover


def test_a_driver_paused_between_its_check_and_its_publish_publishes_nothing(
    spark: Any, tmp_path: Path
) -> None:
    """A real driver stops itself (SIGSTOP) after its lease check for checkpoint 3; a
    successor takes the lease over once it expired and runs the job to its end; the
    first, resumed, finds checkpoint 3 fenced and stops: every row once."""
    base = str(tmp_path)
    stale = driver("paused", base)
    marker = Path(base, "paused")
    while not marker.exists():
        assert stale.poll() is None, stale.communicate()
        time.sleep(0.05)
    job = tmp_path / "chk" / "unbounded"
    holder = read_holder(CheckpointStorage.from_uri(str(job)), str(job))
    assert holder is not None and holder.pid == stale.pid
    time.sleep(max(0.0, holder.ttl_seconds - holder.age()) + 0.5)  # the lease may be taken
    result = build(spark, base, end=3000).execute("unbounded")
    assert result.status == "FINISHED"
    assert data_ids(base) == list(range(3000))
    os.kill(stale.pid, signal.SIGCONT)  # it wakes up between its check and its write
    outcome = result_of(stale)
    assert "refused" in outcome, outcome
    assert "checkpoint 3 was already fenced by run" in outcome["refused"]
    assert outcome["refused"].startswith("LeaseLostError")
    ids = data_ids(base)
    assert ids == list(range(3000)), duplicates(ids)  # nothing published twice
    record = result_record(base, "unbounded")
    assert (record["status"], record["run_id"]) == ("FINISHED", result.run_id)
    assert staged_files(base) == []
    again = build(spark, base, end=3000).execute("unbounded")  # the job starts again
    assert (again.status, again.run_id) == ("FINISHED", result.run_id)


# ---- commits are never replayed ----


def test_a_lost_newest_checkpoint_after_its_commit_refuses_the_restart(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    for _ in range(3):
        build(spark, base, retained_checkpoints=3).execute("kept", trigger=EpochTrigger.once())
    assert data_ids(base) == list(range(900))
    checkpoints = tmp_path / "chk" / "kept" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["chk-1", "chk-2", "chk-3"]
    metadata = checkpoints / "chk-3" / "_metadata.json"
    metadata.unlink()
    with pytest.raises(CheckpointError) as refused:
        build(spark, base, retained_checkpoints=3).execute("kept", trigger=EpochTrigger.once())
    message = str(refused.value)
    assert f"checkpoint 3 was committed ({tmp_path}/chk/kept/_commits/chk-3.json)" in message
    assert f"its metadata {metadata} is missing" in message
    assert "would resume from checkpoint 2" in message
    assert data_ids(base) == list(range(900))  # nothing committed twice

    metadata.write_text('{"job_name": "kept", "checkpoint')  # back, but truncated
    with pytest.raises(CheckpointError, match=f"{metadata} is not valid JSON"):
        build(spark, base, retained_checkpoints=3).execute("kept", trigger=EpochTrigger.once())
    assert data_ids(base) == list(range(900))


def test_a_savepoint_whose_commit_fails_fails_the_job_and_the_restart_completes_it(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    marker = f"{base}/commit-failed"
    sink = unbounded_jobs.SavepointCommitFailsOnce(f"{base}/out", marker)
    client = build(spark, base, end=3000, sink=sink).execute_async("unbounded")
    wait_for_epochs(client, 2)
    with pytest.raises(JobControlError, match="the stop failed: CommitError"):
        client.stop()
    with pytest.raises(CommitError, match="start the job again"):
        client.result()  # the checkpoint completed: its commit is never only a request's
    assert Path(marker).exists()
    published = data_ids(base)
    assert published and duplicates(published) == {}  # some files of the savepoint are out
    assert result_record(base, "unbounded")["status"] == "FAILED"

    result = build(spark, base, end=3000).execute("unbounded")  # completes the commit first
    assert result.status == "FINISHED"
    ids = data_ids(base)
    assert ids == list(range(3000)), duplicates(ids)
    assert staged_files(base) == []


# ---- nothing left behind ----


def test_a_worker_killed_mid_epoch_leaves_nothing_in_staging(tmp_path: Path) -> None:
    base = str(tmp_path)
    result = result_of(driver("worker-kill", base))
    assert result["status"] == "FINISHED"
    assert Path(base, "killed-worker").exists()  # the worker really died, once
    ids = data_ids(base)
    assert ids == list(range(1500)), duplicates(ids)
    assert staged_files(base) == []
    assert list(Path(base, "chk", "unbounded").glob("*/tasks/*")) == []  # task markers too


# ---- a dead job looks dead ----


def test_a_killed_driver_is_reported_not_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(tmp_path)
    process = driver("killed", base)
    process.communicate(timeout=300)
    assert process.returncode == -signal.SIGKILL
    killed_at = time.time()
    client = JobClient(f"{base}/chk", "unbounded")
    job = str(Path(base, "chk", "unbounded"))
    lease = read_holder(CheckpointStorage.from_uri(job), job)
    assert lease is not None and lease.ttl_seconds == 2.5  # the file outlived its driver
    while client.status()["status"] == "RUNNING":
        assert time.time() - killed_at < 3 * lease.ttl_seconds
        time.sleep(0.1)
    status = client.status()
    assert status["status"] == "NOT_RUNNING" and status["recorded_status"] == "RUNNING"
    assert status["since"] == lease.renewed
    assert [e["checkpoint_id"] for e in status["epochs"]] == [1, 2]
    assert main(["status", f"{base}/chk/unbounded"]) == 0
    shown = capsys.readouterr().out
    assert "NOT RUNNING since" in shown and "its driver is gone (recorded RUNNING)" in shown
    assert "epoch 2  chk-2 checkpoint" in shown
    with pytest.raises(JobControlError, match="is not running"):
        client.stop()


def flintlock_run(base: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": str(HERE)}
    command = [sys.executable, "-m", "flintlock.cli", "run", str(SCRIPT), "--", "sigint", base]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )


def wait_until_running(client: JobClient, epochs: int, after_run: str | None = None) -> str:
    """Until the job's driver runs ``epochs`` epochs of a run other than ``after_run``."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            status = client.status()
            running = status["status"] == "RUNNING" and status["run_id"] != after_run
            if running and len(status["epochs"]) >= epochs:
                return str(status["run_id"])
        except JobControlError:
            pass  # not started yet
        time.sleep(0.1)
    raise AssertionError(f"the job did not run {epochs} epochs")


def test_ctrl_c_stops_with_a_savepoint_and_twice_cancels(spark: Any, tmp_path: Path) -> None:
    base = str(tmp_path)
    client = JobClient(f"{base}/chk", "sigint")
    process = flintlock_run(base)
    first = wait_until_running(client, 2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, out[-2000:] + err[-4000:]
    assert "Traceback" not in err, err
    assert "SIGINT: stopping at the next epoch boundary with a savepoint" in err
    record = result_record(base, "sigint")
    assert record["status"] == "STOPPED" and record["run_id"] == first
    assert f"stopped with savepoint {record['savepoint']}" in err
    assert Path(record["savepoint"], "_metadata.json").is_file()
    stopped_ids = data_ids(base)
    assert stopped_ids == list(range(len(stopped_ids))) and len(stopped_ids) % 300 == 0

    process = flintlock_run(base)  # continues from the savepoint; then Ctrl-C twice
    wait_until_running(client, 1, after_run=first)
    process.send_signal(signal.SIGINT)
    time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, out[-2000:] + err[-4000:]
    assert "Traceback" not in err, err
    assert "the job was canceled (SIGINT received twice)" in err
    assert result_record(base, "sigint")["status"] == "CANCELED"
    assert client.status()["status"] == "CANCELED"

    result = build(spark, base, end=SIGINT_END, per_epoch=3000).execute("sigint")
    assert result.status == "FINISHED"
    ids = data_ids(base)
    assert ids == list(range(SIGINT_END)), duplicates(ids)


# ---- control requests are answered, never left behind ----


def test_a_stop_to_a_finished_job_is_refused_and_the_next_run_runs_all_epochs(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(tmp_path)
    env = build(spark, base, end=900)
    first = env.execute("done", trigger=EpochTrigger.available_now())
    assert (first.status, first.epochs) == ("FINISHED", 3)
    client = JobClient(f"{base}/chk", "done")
    started = time.monotonic()
    with pytest.raises(JobControlError, match=r"'done' is not running \(recorded FINISHED"):
        client.stop()
    assert main(["stop", "done", "--checkpoint-dir", f"{base}/chk"]) == 1
    assert "is not running" in capsys.readouterr().err
    assert time.monotonic() - started < 5  # refused at once, not after a timeout
    control = tmp_path / "chk" / "done" / "_control"
    assert not control.exists() or list(control.iterdir()) == []
    control.mkdir(exist_ok=True)  # a request an older driver never took
    (control / "00000000000000000001-old.json").write_text(
        json.dumps({"action": "stop", "drain": False, "run_id": first.run_id})
    )
    overwrite = unbounded_jobs.FileSink(f"{base}/out", mode="overwrite")
    again = build(spark, base, end=900, sink=overwrite).execute(
        "done", new_run=True, trigger=EpochTrigger.available_now()
    )
    assert (again.status, again.epochs) == ("FINISHED", 3)  # not stopped after one epoch
    assert list(control.iterdir()) == []
    assert data_ids(base) == list(range(900))


class SlowFinalEpoch(RunningSumUntilTheEnd):
    """Takes two seconds over the first id of the final epoch (ids 600..899)."""

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        if value["id"] == 600:
            time.sleep(2.0)
        super().process_element(value, ctx, out)


def test_a_stop_during_the_final_epoch_is_answered_by_the_final_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    env = build(spark, base, end=900, function=SlowFinalEpoch())
    client = env.execute_async("final")
    wait_for_epochs(client, 2)
    answer = client.stop()  # sent while the third, final epoch runs
    result = client.result()
    assert (result.status, result.epochs, result.checkpoint_id) == ("FINISHED", 3, 3)
    assert answer == f"{base}/chk/final/checkpoints/chk-3"
    metadata = json.loads(Path(answer, "_metadata.json").read_text())
    assert metadata["final"] is True
    assert data_ids(base) == list(range(900))
    timers = [r for r in committed_rows(base) if r["id"] < 0]
    assert len(timers) == KEYS  # the input really ended: every key's timer fired
    assert list((tmp_path / "chk" / "final" / "_control").iterdir()) == []


def test_the_status_describes_one_run_and_the_jobs_latest_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    """After a FAILED run its committed checkpoints stay the job's latest; a new run's
    status shows none of the failed run's epochs."""
    base = str(tmp_path)
    client = JobClient(f"{base}/chk", "unbounded")
    failing = build(spark, base, end=3000, function=unbounded_jobs.FailsFrom(900))
    with pytest.raises(FlintlockError, match="injected failure at id 9"):
        failing.execute("unbounded")
    failed = client.status()
    assert failed["status"] == "FAILED"
    assert failed["latest_checkpoint"] == 3  # epochs 1-3 were committed
    old_run = failed["run_id"]
    seen: list[dict[str, Any]] = []

    def status_at_each_epoch(figures: dict[str, Any]) -> None:
        seen.append(client.status())

    result = build(spark, base, end=1500).execute("unbounded", progress=status_at_each_epoch)
    assert result.status == "FINISHED" and result.run_id != old_run
    first = seen[0]
    assert (first["status"], first["run_id"]) == ("RUNNING", result.run_id)
    assert [e["checkpoint_id"] for e in first["epochs"]] == [4]  # its own epoch only
    assert first["latest_checkpoint"] == 4
    assert data_ids(base) == list(range(1500))
