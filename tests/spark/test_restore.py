"""Restore and rescale on Spark, against uninterrupted runs computed in plain Python; the
offline reader returns exactly the state a job held; damaged, missing and foreign
checkpoint files are refused by name before anything runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
import restore_jobs
from pyspark import cloudpickle
from restore_jobs import ROWS, N, build, collected, final_totals, running_sums

from flintlock import CheckpointError
from flintlock.checkpoints import list_checkpoints, read_state, read_state_dataframe
from flintlock.cli import main
from flintlock.core.exchange.key_groups import key_group_of
from flintlock.errors import RestoreError
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.files import FileSink

SCRIPT = Path(__file__).with_name("restore_jobs.py")
cloudpickle.register_pickle_by_value(restore_jobs)


def state_of(path: Path) -> dict[int, int]:
    table = read_state(str(path), "sums", "total")
    groups = table.column("key_group").to_pylist()
    keys = table.column("key").to_pylist()
    assert groups == sorted(groups) and groups == [key_group_of(k) for k in keys]
    assert len(set(keys)) == len(keys)  # each key once
    return dict(zip(keys, table.column("value").to_pylist(), strict=True))


@pytest.fixture(scope="module")
def first_half(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Job 'part-1' at parallelism 2 over rows 0..N/2; returns its job folder."""
    base = tmp_path_factory.mktemp("first-half")
    env = build(spark, str(base), ROWS[: N // 2], 2, "input-1", CollectSink("out"))
    result = env.execute("part-1")
    assert sorted(collected(result)) == running_sums(ROWS[: N // 2])
    return base / "chk" / "part-1"


@pytest.mark.parametrize("parallelisms", [(2, 3), (3, 1)])
def test_rescaled_restore_equals_an_uninterrupted_run(
    spark: Any, tmp_path: Path, parallelisms: tuple[int, int]
) -> None:
    thirds = [ROWS[:1000], ROWS[1000:2000], ROWS[2000:]]
    before, after = parallelisms
    output: list[tuple[int, int, int]] = []
    restore_from = None
    for index, (rows, parallelism) in enumerate(
        zip(thirds, (before, before, after), strict=True), 1
    ):
        env = build(spark, str(tmp_path), rows, parallelism, f"input-{index}", CollectSink("out"))
        result = env.execute(
            f"part-{index}", restore_from=restore_from, allow_non_restored_state=index > 1
        )
        output += collected(result)
        job_folder = tmp_path / "chk" / f"part-{index}"
        # the offline reader returns exactly the state the job held
        assert state_of(job_folder) == final_totals(ROWS[: 1000 * index])
        restore_from = str(job_folder)
    assert sorted(output) == running_sums(ROWS)
    assert result.checkpoint_id == 3
    jobs = [(c.job_name, c.checkpoint_id) for c in list_checkpoints(str(tmp_path / "chk"))]
    assert jobs == [
        ("part-1", 1),
        ("part-2", 2),
        ("part-3", 3),
    ]  # each restored run's checkpoint follows the restored one


def test_every_restored_subtask_is_notified_of_the_restored_checkpoint_before_data(
    spark: Any, first_half: Path, tmp_path: Path, make_recorder: Any
) -> None:
    recorder = make_recorder()
    env = build(
        spark, str(tmp_path), ROWS[N // 2 :], 3, "input-2", CollectSink("out"), plugins=[recorder]
    )
    result = env.execute("part-2", restore_from=str(first_half), allow_non_restored_state=True)
    # the second half continues the first half's sums: the uninterrupted run's later rows
    assert sorted(collected(result)) == [r for r in running_sums(ROWS) if r[1] >= N // 2]
    chains = {"source:collection": ["source:collection"], "sums -> out": ["out", "sums"]}
    assert sorted(recorder.by_task) == ["source:collection#0"] + [
        f"sums -> out#{s}" for s in range(3)
    ]
    for task, calls in recorder.by_task.items():
        operator_calls = [c for c in calls if c[0].startswith("operator_")]
        kinds = [c[0] for c in operator_calls]
        last_open = max(i for i, kind in enumerate(kinds) if kind == "operator_open")
        notified = [c[1:] for c in operator_calls if c[0] == "operator_notify_checkpoint_complete"]
        # tail to head, as every checkpoint notification along a chain
        assert notified == [(name, 1) for name in chains[task.split("#")[0]]], task
        first_notify = kinds.index("operator_notify_checkpoint_complete")
        assert (
            first_notify == last_open + 1 and "operator_process_batch" not in kinds[:first_notify]
        )
    assert result.checkpoint_id == 2


def test_driver_killed_after_the_checkpoint_then_restored_writes_exactly_once(
    spark: Any, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SCRIPT.parent,
    )
    assert done.returncode == -9, done.stdout[-2000:] + done.stderr[-4000:]
    assert not list((tmp_path / "out").glob("part-*"))  # killed before the commit
    chk1 = tmp_path / "chk" / "sums" / "checkpoints" / "chk-1"
    out = str(tmp_path / "out")

    # restored from its completed checkpoint: the pending commit completes, nothing reruns
    again = build(spark, str(tmp_path), ROWS[: N // 2], 2, "input-1", FileSink(out))
    resumed = again.execute("sums", restore_from=str(chk1))
    assert resumed.resumed and resumed.checkpoint_id == 1

    # a new run continues the state with the second half, appended to the same output
    rest = build(spark, str(tmp_path), ROWS[N // 2 :], 3, "input-2", FileSink(out, mode="append"))
    second = rest.execute(
        "sums", new_run=True, restore_from=str(chk1), allow_non_restored_state=True
    )
    assert second.checkpoint_id == 2
    written = ds.dataset(out, format="parquet").to_table()
    rows = zip(*(written.column(c).to_pylist() for c in ("k", "v", "total")), strict=True)
    assert sorted(rows) == running_sums(ROWS)  # every row exactly once, sums continued
    assert state_of(tmp_path / "chk" / "sums") == final_totals(ROWS)
    # retention (1): chk-1 went once chk-2 was committed
    assert [c.checkpoint_id for c in list_checkpoints(str(tmp_path / "chk" / "sums"))] == [2]


def test_offline_reader_and_cli(
    spark: Any, first_half: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = final_totals(ROWS[: N // 2])
    assert state_of(first_half) == expected
    chk1 = first_half / "checkpoints" / "chk-1"
    assert state_of(chk1) == expected
    frame = read_state_dataframe(spark, str(chk1), "sums", "total")
    assert {r["key"]: r["value"] for r in frame.collect()} == expected
    positions = read_state(str(chk1), "input-1", "source-positions")
    assert positions.column_names == ["subtask", "value"] and positions.num_rows == 1

    assert main(["checkpoints", "list", str(first_half)]) == 0
    listed = capsys.readouterr().out.split()
    assert listed[:6] == ["chk-1", "part-1", "run", listed[3], "final", "committed"]
    assert main(["checkpoints", "show", str(first_half)]) == 0
    shown = json.loads(capsys.readouterr().out)
    sums = next(o for o in shown["operators"] if o["uid"] == "sums")
    assert sums["parallelism"] == 2 and sums["states"][0]["state"] == "total"
    assert sums["states"][0]["files"] == 2
    assert main(["checkpoints", "read", str(chk1), "--operator", "sums", "--state", "total"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["key"]: r["value"] for r in lines} == expected
    assert main(["checkpoints", "read", str(chk1), "--operator", "nope", "--state", "x"]) == 1
    assert "has no operator 'nope'" in capsys.readouterr().err


def corrupt_copy(first_half: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy" / "part-1"
    shutil.copytree(first_half, copy)
    return copy


def manifests(job_folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """chk-1's manifests as plain JSON, each with the folder it lies in."""
    metadata = json.loads((job_folder / "checkpoints" / "chk-1" / "_metadata.json").read_text())
    found = []
    for ack in metadata["acknowledgements"]:
        path = Path(ack["manifest_path"])  # a full path: it lies under the run's folder
        assert path.is_absolute(), path
        found.append((path.parent, json.loads(path.read_text())))
    return found


def sums_file(first_half: Path, subtask: int) -> Path:
    for folder, manifest in manifests(first_half):
        if manifest["task_name"] == "sums -> out" and manifest["subtask_index"] == subtask:
            recorded = manifest["operators"]["sums"]["keyed"][0]["path"]
            assert recorded == "./sums/keyed-total.arrow"  # relative to the manifest's folder
            return folder / recorded[2:]
    raise AssertionError("no state file of 'sums'")


def restore_attempt(spark: Any, tmp_path: Path, path: Path, **options: Any) -> Any:
    env = build(spark, str(tmp_path), ROWS[N // 2 :], 2, "input-2", CollectSink("out"), **options)
    return env.execute("part-2", restore_from=str(path), allow_non_restored_state=True)


def test_missing_damaged_and_foreign_files_are_refused_by_name(
    spark: Any, first_half: Path, tmp_path: Path
) -> None:
    state_file = sums_file(first_half, 0)
    saved = state_file.read_bytes()
    try:
        state_file.unlink()  # missing
        with pytest.raises(CheckpointError, match=f"the Arrow file {state_file} is missing"):
            restore_attempt(spark, tmp_path, first_half)
        state_file.write_bytes(saved[: len(saved) // 2])  # truncated
        with pytest.raises(CheckpointError, match=f"the Arrow file {state_file} is damaged"):
            restore_attempt(spark, tmp_path, first_half)
        state_file.write_bytes(sums_file(first_half, 1).read_bytes())  # another subtask's
        with pytest.raises(CheckpointError, match=f"the state file {state_file} holds key groups"):
            restore_attempt(spark, tmp_path, first_half)
    finally:
        state_file.write_bytes(saved)
    assert not (tmp_path / "chk" / "part-2").exists()  # refused before anything was recorded

    metadata = first_half / "checkpoints" / "chk-1" / "_metadata.json"
    foreign = tmp_path / "foreign" / "checkpoints" / "chk-1"
    foreign.mkdir(parents=True)
    (tmp_path / "foreign" / "_job.json").write_text(
        json.dumps({"job_name": "other", "job_id": "0" * 32})
    )
    shutil.copy(metadata, foreign / "_metadata.json")
    with pytest.raises(CheckpointError, match=f"{foreign}/_metadata.json names job 'part-1'"):
        restore_attempt(spark, tmp_path, foreign)
    (foreign / "_metadata.json").write_text('{"job_name": "part-1", "job_')  # damaged
    with pytest.raises(CheckpointError, match=f"{foreign}/_metadata.json is not valid JSON"):
        restore_attempt(spark, tmp_path, foreign)


def test_state_of_a_dropped_operator_and_another_max_parallelism_are_refused(
    spark: Any, first_half: Path, tmp_path: Path
) -> None:
    env = build(spark, str(tmp_path), ROWS, 2, "input-2", CollectSink("out"))
    with pytest.raises(RestoreError, match=r"operator\(s\) \['input-1'\] \(uid\)"):
        env.execute("part-2", restore_from=str(first_half))
    with pytest.raises(RestoreError, match="max parallelism 128, the job has 64"):
        restore_attempt(spark, tmp_path, first_half, max_parallelism=64)
    assert not (tmp_path / "chk" / "part-2").exists()
