"""Unbounded jobs on real local Spark: epochs, stop with and without drain, resume,
savepoints, triggers, and a driver killed between epochs (issue 14)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import unbounded_jobs
from pyspark import cloudpickle
from unbounded_jobs import (
    FAR,
    KEYS,
    CommitLooksForTheNextEpoch,
    SlowRunningSum,
    build,
    committed_rows,
    epoch_under_way,
    wait_for_epochs,
)

from flintlock.cli import main
from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.job.client import JobClient
from flintlock.core.spark import stage_frames
from flintlock.errors import JobControlError
from flintlock.sinks.files import FileSink
from flintlock.testing import LifecycleRecorder

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/

FINISH_CALLS = {"operator_finish", "function_finish", "operator_end_input"}
RESTORED_JOB = """\
import sys

from unbounded_jobs import build

from flintlock import EpochTrigger, FileSink

base, end = sys.argv[1], int(sys.argv[2])
env = build(None, base, end=end, sink=FileSink(f"{base}/restored"))  # the active session
env.execute("restored", trigger=EpochTrigger.available_now())  # a new job: no state of its own
"""


def one_pass(ids: list[int]) -> dict[int, int]:
    """The same logic over the same rows in one pass: each key's total."""
    totals: dict[int, int] = {}
    for i in ids:
        totals[i % KEYS] = totals.get(i % KEYS, 0) + i
    return totals


def data_and_timer_rows(rows: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    return [r for r in rows if r["id"] >= 0], [r for r in rows if r["id"] < 0]


def final_totals(rows: list[dict[str, Any]]) -> dict[int, int]:
    """Each key's last running total (totals only grow: ids are not negative)."""
    totals: dict[int, int] = {}
    for row in rows:
        totals[row["k"]] = max(totals.get(row["k"], 0), row["total"])
    return totals


def finish_calls(recorder: LifecycleRecorder) -> list[tuple[str, Any]]:
    return [
        (task, call)
        for task, calls in recorder.by_task.items()
        for call in calls
        if call[0] in FINISH_CALLS
    ]


def test_stop_resume_and_drain_equal_one_pass(spark: Any, tmp_path: Path) -> None:
    base = str(tmp_path)
    first = LifecycleRecorder()
    client = build(spark, base, [first]).execute_async("unbounded")
    wait_for_epochs(client, 3)
    savepoint = client.stop()  # without drain: a savepoint, no finish
    stopped = client.result()
    assert stopped.status == "STOPPED" and stopped.savepoint_path == savepoint
    assert Path(savepoint, "_metadata.json").is_file()
    assert finish_calls(first) == []  # no end_input, no finish in any epoch
    rows, timers = data_and_timer_rows(committed_rows(base))
    assert timers == []  # MAX_WATERMARK never came: the far timers wait in state
    assert sorted(r["id"] for r in rows) == list(range(300 * stopped.epochs))
    assert client.status()["status"] == "STOPPED"

    second = LifecycleRecorder()  # resumed from the savepoint, named explicitly
    client = build(spark, base, [second]).execute_async("unbounded", restore_from=savepoint)
    wait_for_epochs(client, 2, after_run=stopped.run_id)  # two epochs of the new run
    drained_at = client.stop(drain=True)
    drained = client.result()
    # the input ended: FINISHED, as Flink reports a drained stop-with-savepoint
    assert drained.status == "FINISHED" and drained.savepoint_path == drained_at
    assert client.status()["status"] == "FINISHED"

    rows, timers = data_and_timer_rows(committed_rows(base))
    ids = sorted(r["id"] for r in rows)
    assert ids == list(range(300 * (stopped.epochs + drained.epochs)))  # no loss, no dup
    reference = one_pass(ids)
    assert final_totals(rows) == reference
    # with drain every pending event-time timer fired, once per key, with the total
    assert sorted((r["k"], r["total"]) for r in timers) == sorted(reference.items())
    # finish ran once per subtask of each vertex, in the last epoch only
    finished = finish_calls(second)
    per_task = {task for task, call in finished if call[0] == "operator_finish"}
    assert len(per_task) == 4  # 2 source + 2 keyed subtasks
    assert sum(1 for _, call in finished if call[0] == "function_finish") == 2


def test_a_stop_asked_during_an_epoch_is_taken_at_that_epochs_end(
    spark: Any, tmp_path: Path
) -> None:
    """As Flink's stop-with-savepoint: the savepoint is the checkpoint of the epoch during
    which the stop was asked, with no further epoch (no extra normal checkpoint)."""
    base = str(tmp_path)
    client = build(spark, base, per_epoch=20, function=SlowRunningSum()).execute_async("late")
    during = epoch_under_way("late", first=2)
    savepoint = client.stop()
    stopped = client.result()
    assert Path(savepoint).name.startswith(f"savepoint-{during}-")
    assert stopped.status == "STOPPED" and stopped.savepoint_path == savepoint
    assert stopped.epochs == during  # epochs 1..during, the last one the savepoint
    checkpoints = Path(base, "chk", "late", "checkpoints")
    metadata = json.loads(Path(checkpoints, f"chk-{during}", "_metadata.json").read_text())
    assert metadata["kind"] == "savepoint" and metadata["savepoint"] == savepoint
    assert not Path(checkpoints, f"chk-{during + 1}").exists()
    assert Path(savepoint, "_metadata.json").is_file()
    assert sorted(r["id"] for r in committed_rows(base)) == list(range(20 * during))

    # the savepoint restores: the next epoch reads on from where it stopped
    resumed = build(spark, base, per_epoch=20).execute(
        "late", restore_from=savepoint, trigger=EpochTrigger.once()
    )
    assert resumed.epochs == 1
    assert sorted(r["id"] for r in committed_rows(base)) == list(range(20 * (during + 1)))


def test_a_savepoint_asked_during_an_epoch_is_that_epochs_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    """As Flink triggers a savepoint at the next barrier: the epoch running when it was
    asked completes as the savepoint, and the job goes on."""
    base = str(tmp_path)
    client = build(spark, base, per_epoch=20, function=SlowRunningSum()).execute_async("asked")
    during = epoch_under_way("asked", first=2)
    savepoint = client.savepoint()
    assert Path(savepoint).name.startswith(f"savepoint-{during}-")
    checkpoints = Path(base, "chk", "asked", "checkpoints")
    metadata = json.loads(Path(checkpoints, f"chk-{during}", "_metadata.json").read_text())
    assert metadata["kind"] == "savepoint" and metadata["savepoint"] == savepoint
    wait_for_epochs(client, during + 1)  # the job goes on after it
    client.stop()
    stopped = client.result()
    assert stopped.epochs > during
    assert sorted(r["id"] for r in committed_rows(base)) == list(range(20 * stopped.epochs))


def test_a_savepoint_leaves_the_job_running(spark: Any, tmp_path: Path) -> None:
    base = str(tmp_path)
    client = build(spark, base).execute_async(
        "unbounded", trigger=EpochTrigger.processing_time(0.0)
    )
    wait_for_epochs(client, 1)
    savepoint = client.savepoint()
    taken = int(Path(savepoint).name.split("-")[1])  # savepoint-<N>-<hex>
    wait_for_epochs(client, taken + 1)  # epochs go on after it
    client.stop()
    result = client.result()
    assert result.epochs > taken
    assert Path(savepoint, "_metadata.json").is_file()  # retention keeps savepoint folders
    ids = sorted(r["id"] for r in committed_rows(base))
    assert ids == list(range(300 * result.epochs))


def test_available_now_reads_to_the_end_and_finishes(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = str(tmp_path)
    built = []
    build_stages = stage_frames.build_stages
    monkeypatch.setattr(stage_frames, "_kept", OrderedDict())  # none shared by earlier tests
    monkeypatch.setattr(
        stage_frames, "build_stages", lambda *a: built.append(a) or build_stages(*a)
    )
    result = build(spark, base, end=1000).execute(
        "bounded-seq", trigger=EpochTrigger.available_now()
    )
    assert result.status == "FINISHED"
    assert result.epochs == 4  # 300, 300, 300, 100: the sequence ended in the fourth
    assert len(built) == 1  # the run's epochs reuse one DataFrame, each with its own part
    rows, timers = data_and_timer_rows(committed_rows(base))
    assert sorted(r["id"] for r in rows) == list(range(1000))
    assert sorted((r["k"], r["total"]) for r in timers) == sorted(one_pass(range(1000)).items())


@pytest.mark.parametrize("beside", [True, False])
def test_a_commit_runs_beside_the_next_epoch_where_every_sink_allows_it(
    spark: Any, tmp_path: Path, beside: bool
) -> None:
    """Checkpoint N's commit runs while epoch N+1's Spark job does (the final one in
    line, before the job ends); a sink that does not allow it commits between epochs.
    Either way every row once, and the epochs' figures in order."""
    base, notes = str(tmp_path), tmp_path / "commits.jsonl"
    sink = CommitLooksForTheNextEpoch(f"{base}/out", str(notes), "beside", beside)
    shown: list[tuple[int, str]] = []  # the progress callback runs on the run's thread

    def progress(figures: dict[str, Any]) -> None:
        shown.append((figures["checkpoint_id"], threading.current_thread().name))

    result = build(spark, base, end=1000, sink=sink).execute(
        "beside", trigger=EpochTrigger.available_now(), progress=progress
    )
    assert (result.status, result.epochs) == ("FINISHED", 4)
    here = threading.current_thread().name
    assert shown == [(n, here) for n in (1, 2, 3, 4)]
    seen = [json.loads(line) for line in notes.read_text().splitlines()]
    if beside:  # each commit saw the next epoch under way; the last had none after it
        assert seen == [[1, 2], [2, 3], [3, 4], [4, None]]
    else:
        assert seen == [[1, None], [2, None], [3, None], [4, None]]
    rows, timers = data_and_timer_rows(committed_rows(base))
    assert sorted(r["id"] for r in rows) == list(range(1000))
    assert sorted((r["k"], r["total"]) for r in timers) == sorted(one_pass(range(1000)).items())
    figures = JobClient(f"{base}/chk", "beside").status()["epochs"]
    assert [(f["epoch"], f["checkpoint_id"]) for f in figures] == [(n, n) for n in (1, 2, 3, 4)]


def test_once_runs_one_epoch_and_the_next_start_continues(spark: Any, tmp_path: Path) -> None:
    base = str(tmp_path)
    for epochs in (1, 2, 3):
        result = build(spark, base).execute("once", trigger=EpochTrigger.once())
        assert (result.status, result.epochs) == ("STOPPED", 1)
        assert sorted(r["id"] for r in committed_rows(base)) == list(range(300 * epochs))
        figures = JobClient(f"{base}/chk", "once").status()["epochs"][-1]
        assert figures["records_in"] == {"source:sequence": 300, "keyed_process -> files": 300}
        assert figures["records_out"] == {"source:sequence": 300, "keyed_process -> files": 300}


@pytest.mark.parametrize("mode", ["error", "overwrite"])
def test_a_driver_killed_between_epochs_restarts_exactly_once(
    spark: Any, tmp_path: Path, mode: str
) -> None:
    """The start after the kill continues the job (a new run id): an overwrite sink
    replaced the output at the job's first commit and must not again."""
    base = str(tmp_path)
    script = Path(__file__).with_name("unbounded_jobs.py")
    done = subprocess.run(
        [sys.executable, str(script), base, "3", mode], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == -9, done.stdout[-2000:] + done.stderr[-3000:]
    assert sorted(r["id"] for r in committed_rows(base)) == list(range(900))
    sink = FileSink(f"{base}/out", mode=mode)
    result = build(spark, base, end=3000, sink=sink).execute("unbounded")  # from chk-3
    assert result.status == "FINISHED"
    rows, timers = data_and_timer_rows(committed_rows(base))
    assert sorted(r["id"] for r in rows) == list(range(3000))
    assert sorted((r["k"], r["total"]) for r in timers) == sorted(one_pass(range(3000)).items())
    assert FAR > 3000


def test_the_cli_shows_status_takes_a_savepoint_and_stops_with_drain(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(tmp_path)
    client = build(spark, base).execute_async("cli job")
    wait_for_epochs(client, 1)
    folder = str(tmp_path / "chk" / "cli%20job")
    assert main(["status", folder]) == 0
    status = capsys.readouterr().out
    assert "job 'cli job'  RUNNING" in status and "epoch 1  chk-1 checkpoint" in status
    assert main(["savepoint", folder]) == 0
    savepoint = capsys.readouterr().out.strip()
    assert Path(savepoint, "_metadata.json").is_file()
    assert client.is_running()
    assert main(["stop", "cli job", "--checkpoint-dir", f"{base}/chk", "--drain"]) == 0
    drained = capsys.readouterr().out.strip()
    result = client.result()
    assert (result.status, result.savepoint_path) == ("FINISHED", drained)
    rows, timers = data_and_timer_rows(committed_rows(base))
    assert sorted(r["id"] for r in rows) == list(range(300 * result.epochs))
    assert len(timers) == KEYS
    assert main(["status", folder]) == 0
    assert "FINISHED" in capsys.readouterr().out  # a drain ends the input
    assert main(["stop", "no-such-job", "--checkpoint-dir", f"{base}/chk", "--timeout", "0.2"]) == 1
    assert "there is no job 'no-such-job'" in capsys.readouterr().err
    assert not (tmp_path / "chk" / "no-such-job").exists()


def test_a_failed_savepoint_fails_the_request_and_the_job_goes_on(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    client = build(spark, base).execute_async("unbounded")
    wait_for_epochs(client, 1)
    blocker = tmp_path / "chk" / "unbounded" / "savepoints"
    blocker.write_text("a file where the savepoints folder goes: every savepoint fails")
    with pytest.raises(JobControlError, match="the savepoint failed"):
        client.savepoint()
    with pytest.raises(JobControlError, match="the stop failed"):
        client.stop()
    assert client.is_running()  # the job went on from its last checkpoint
    done = len(client.status()["epochs"])
    wait_for_epochs(client, done + 1)
    blocker.unlink()
    savepoint = client.stop()
    result = client.result()
    assert result.status == "STOPPED" and Path(savepoint, "_metadata.json").is_file()
    ids = sorted(r["id"] for r in committed_rows(base))
    assert ids == list(range(300 * result.epochs))  # the failed epochs left nothing behind


def test_flintlock_run_from_savepoint_starts_a_new_job_from_a_stopped_jobs_state(
    spark: Any, tmp_path: Path
) -> None:
    """`flintlock run --from-savepoint SP job.py`: the savepoint `stop` printed gives a
    new job (another name) its sources' positions and its keyed sums, as Flink's -s."""
    base = str(tmp_path)
    client = build(spark, base).execute_async("first")
    wait_for_epochs(client, 1)
    savepoint = client.stop()
    done = 300 * client.result().epochs
    job = tmp_path / "restored_job.py"
    job.write_text(RESTORED_JOB)
    end = done + 300
    assert main(["run", "-q", "--from-savepoint", savepoint, str(job), base, str(end)]) == 0
    rows, timers = data_and_timer_rows(pq.read_table(f"{base}/restored").to_pylist())
    assert sorted(r["id"] for r in rows) == list(range(done, end))  # the sequence went on
    assert sorted((r["k"], r["total"]) for r in timers) == sorted(one_pass(range(end)).items())
