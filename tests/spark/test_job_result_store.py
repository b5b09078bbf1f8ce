"""The job result store (FLIP-194): a driver killed after the final commit, started
again, returns the stored result and runs nothing; a new run is asked for explicitly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from killed_driver_job import ROWS, build

from flintlock.cli import main
from flintlock.errors import SinkOutputError
from flintlock.sinks.files import FileSink

SCRIPT = Path(__file__).with_name("killed_driver_job.py")


def kill_driver_at(base: Path, point: str) -> None:
    """Run the job in its own process; its driver is SIGKILLed at ``point``."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(base), point],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SCRIPT.parent,
    )
    assert done.returncode == -9, done.stdout[-2000:] + done.stderr[-4000:]
    assert (base / f"killed-{point}").exists()


def committed(base: Path) -> list[int]:
    table = ds.dataset(str(base / "out"), format="parquet").to_table()
    return sorted(table.column("v").to_pylist())


def test_killed_after_the_final_commit_then_started_again(spark: Any, tmp_path: Path) -> None:
    kill_driver_at(tmp_path, "after-commit")
    assert committed(tmp_path) == list(range(ROWS))  # committed before the kill
    env, _ = build(spark, str(tmp_path), FileSink(str(tmp_path / "out")))
    result = env.execute("killed")
    assert result.resumed and result.checkpoint_id == 1
    assert committed(tmp_path) == list(range(ROWS))  # not run again: no row twice
    assert sorted(result.collected["rows"].column("v").to_pylist()) == list(range(ROWS))
    assert result.records_out == {"source:collection": ROWS, "files": ROWS, "rows": ROWS}

    third, _ = build(spark, str(tmp_path), FileSink(str(tmp_path / "out")))
    stored = third.execute("killed")  # FINISHED is recorded now: the stored result
    assert stored.already_finished and stored.run_id == result.run_id
    assert sorted(stored.collected["rows"].column("v").to_pylist()) == list(range(ROWS))
    assert committed(tmp_path) == list(range(ROWS))


def test_flintlock_status_shows_a_finished_bounded_jobs_result(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env, _ = build(spark, str(tmp_path), FileSink(str(tmp_path / "out")))
    result = env.execute("bounded job")
    assert main(["status", "bounded job", "--checkpoint-dir", f"{tmp_path}/chk"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == (
        f"job 'bounded job'  FINISHED  run {result.run_id}  latest checkpoint "
        f"{result.checkpoint_id}"
    )
    records = ", ".join(f"{name} {count:,}" for name, count in result.records_out.items())
    assert shown[1].startswith(f"result: records out {records} in ")
    assert committed(tmp_path) == list(range(ROWS))


def test_killed_between_checkpoint_and_commit_then_started_again(
    spark: Any, tmp_path: Path
) -> None:
    kill_driver_at(tmp_path, "before-commit")
    assert not list((tmp_path / "out").glob("part-*"))
    env, _ = build(spark, str(tmp_path), FileSink(str(tmp_path / "out")))
    result = env.execute("killed")
    assert result.resumed and not result.already_finished  # completed the pending commit
    assert committed(tmp_path) == list(range(ROWS))
    assert sorted(result.collected["rows"].column("v").to_pylist()) == list(range(ROWS))


def test_a_new_run_is_asked_for_and_the_output_mode_decides(spark: Any, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    env, _ = build(spark, str(tmp_path), FileSink(out))
    first = env.execute("twice")
    again, _ = build(spark, str(tmp_path), FileSink(out))
    assert again.execute("twice").already_finished  # a second start runs nothing
    refused, _ = build(spark, str(tmp_path), FileSink(out))
    with pytest.raises(SinkOutputError, match=f"{out} already holds data .* job 'twice'"):
        refused.execute("twice", new_run=True)
    assert committed(tmp_path) == list(range(ROWS))
    after_refusal, _ = build(spark, str(tmp_path), FileSink(out))
    assert after_refusal.execute("twice").run_id == first.run_id  # still the stored result
    replaced, _ = build(spark, str(tmp_path), FileSink(out, mode="overwrite"))
    second = replaced.execute("twice", new_run=True)
    assert second.run_id != first.run_id and second.checkpoint_id == 2
    assert committed(tmp_path) == list(range(ROWS))  # replaced, not doubled
    added, _ = build(spark, str(tmp_path), FileSink(out, mode="append"))
    added.execute("twice", new_run=True)
    assert committed(tmp_path) == sorted(list(range(ROWS)) * 2)  # appended, as asked
