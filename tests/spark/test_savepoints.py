"""Savepoints on Spark: a bounded keyed job's final snapshot is a savepoint in a folder of
its own; copied elsewhere, with the job folder and the original deleted, it restores a new
job at another parallelism (checked against plain Python), the CLI reads it, damaged
files are refused where they really are, and retention never deletes a savepoint."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import killed_driver_job
import pyarrow.dataset as ds
import pytest
import restore_jobs
from killed_driver_job import CommitDiesAfterOneFile
from pyspark import cloudpickle
from restore_jobs import ROWS, N, build, collected, final_totals, running_sums

from flintlock import CheckpointError
from flintlock.checkpoints import list_checkpoints, load_checkpoint, read_state
from flintlock.cli import main
from flintlock.core.job.master import JobConfig, JobMaster
from flintlock.core.job.result import JobExecutionResult
from flintlock.errors import CommitError
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.files import FileSink

cloudpickle.register_pickle_by_value(restore_jobs)
cloudpickle.register_pickle_by_value(killed_driver_job)  # workers cannot import tests/

FIRST, SECOND = ROWS[: N // 2], ROWS[N // 2 :]


def totals(path: Path) -> dict[int, int]:
    """Each key's state 'total' of operator 'sums', read offline."""
    table = read_state(str(path), "sums", "total")
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    assert len(set(keys)) == len(keys)
    return dict(zip(keys, values, strict=True))


def savepoint_run(
    spark: Any, base: Path, new_run: bool = False, sink: FileSink | None = None
) -> JobExecutionResult:
    """Job 'part-1' over the first half at parallelism 2, ending in a savepoint."""
    env = build(spark, str(base), FIRST, 2, "input-1", sink or CollectSink("out"))
    config = JobConfig("part-1", f"{base}/chk", savepoint_dir=str(base / "savepoints"))
    return JobMaster(spark, env.transformations, config).execute(new_run=new_run)


def recorded_paths(folder: Path) -> list[str]:
    """Every path the savepoint's metadata and manifests record, read as plain JSON."""
    metadata = json.loads((folder / "_metadata.json").read_text())
    paths = []
    for ack in metadata["acknowledgements"]:
        paths.append(ack["manifest_path"])
        manifest = json.loads((folder / ack["manifest_path"]).read_text())
        paths.append(manifest["directory"])
        for operator in manifest["operators"].values():
            paths += [f["path"] for f in operator["keyed"] + operator["operator_state"]]
            paths += [operator["timers"]] if operator["timers"] else []
    return paths


@pytest.fixture(scope="module")
def moved(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The savepoint of 'part-1', copied elsewhere; job folder and original deleted."""
    base = tmp_path_factory.mktemp("savepoint-job")
    result = savepoint_run(spark, base)
    assert sorted(collected(result)) == running_sums(FIRST)
    assert result.savepoint_path is not None and result.checkpoint_id == 1
    original = Path(result.savepoint_path)
    assert original.parent == base / "savepoints"
    assert re.fullmatch(r"savepoint-1-[0-9a-f]{6}", original.name)
    chk1 = json.loads(
        (base / "chk" / "part-1" / "checkpoints" / "chk-1" / "_metadata.json").read_text()
    )
    assert chk1["savepoint"] == str(original) and chk1["kind"] == "savepoint"
    copy = tmp_path_factory.mktemp("elsewhere") / "kept-savepoint"
    shutil.copytree(original, copy)
    shutil.rmtree(base)  # the job folder and the original savepoint
    return copy


@pytest.mark.slow
def test_a_savepoint_records_only_paths_relative_to_its_own_files(moved: Path) -> None:
    metadata = json.loads((moved / "_metadata.json").read_text())
    assert metadata["kind"] == "savepoint" and metadata["final"]
    assert (metadata["job_name"], metadata["checkpoint_id"]) == ("part-1", 1)
    paths = recorded_paths(moved)
    assert len(metadata["acknowledgements"]) == 3  # source and two 'sums -> out' subtasks
    assert paths and all(p == "." or p.startswith("./") for p in paths), paths
    assert {a["task_name"] for a in metadata["acknowledgements"]} == {
        "source:collection",
        "sums -> out",
    }


@pytest.mark.slow
def test_a_moved_savepoint_restores_a_new_job_at_another_parallelism(
    spark: Any, moved: Path, tmp_path: Path
) -> None:
    assert totals(moved) == final_totals(FIRST)
    env = build(spark, str(tmp_path), SECOND, 3, "input-2", CollectSink("out"))
    result = env.execute("part-2", restore_from=str(moved), allow_non_restored_state=True)
    # the second half continues the savepoint's sums: the uninterrupted run's later rows
    assert sorted(collected(result)) == [r for r in running_sums(ROWS) if r[1] >= N // 2]
    assert result.checkpoint_id == 2 and result.savepoint_path is None
    job_folder = tmp_path / "chk" / "part-2"
    assert totals(job_folder) == final_totals(ROWS)
    restored = load_checkpoint(str(job_folder))
    subtasks = [s.subtask_index for s in restored.subtasks if s.task_name == "sums -> out"]
    assert sorted(subtasks) == [0, 1, 2]
    document = json.loads((job_folder / "checkpoints" / "chk-2" / "_metadata.json").read_text())
    assert document["restored_from"]["path"] == str(moved)


@pytest.mark.slow
def test_the_cli_shows_and_reads_a_moved_savepoint(
    moved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["checkpoints", "show", str(moved)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["kind"], shown["path"], shown["checkpoint_id"]) == ("savepoint", str(moved), 1)
    sums = next(o for o in shown["operators"] if o["uid"] == "sums")
    assert sums["parallelism"] == 2 and sums["states"][0]["files"] == 2
    assert sums["states"][0]["bytes"] > 0  # sizes read where the files really are
    assert main(["checkpoints", "read", str(moved), "--operator", "sums", "--state", "total"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["key"]: r["value"] for r in lines} == final_totals(FIRST)
    assert main(["checkpoints", "list", str(moved)]) == 0
    listed = capsys.readouterr().out.split()
    assert listed[:6] == ["chk-1", "part-1", "run", shown["run_id"], "final", "-"]
    assert listed[-2:] == ["savepoint", str(moved)]


@pytest.mark.slow
def test_a_missing_or_damaged_file_of_a_moved_savepoint_is_refused_where_it_is(
    spark: Any, moved: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "again"
    shutil.copytree(moved, copy)
    checkpoint = load_checkpoint(str(copy))
    sums = next(s for s in checkpoint.subtasks if s.task_name == "sums -> out")
    state_file = Path(sums.operators["sums"].keyed[0].path)
    assert state_file.parent.parent.parent == copy / "sums%20-%3E%20out"

    def restore() -> Any:
        env = build(spark, str(tmp_path), SECOND, 3, "input-2", CollectSink("out"))
        return env.execute("part-2", restore_from=str(copy), allow_non_restored_state=True)

    saved = state_file.read_bytes()
    state_file.write_bytes(saved[: len(saved) // 2])
    with pytest.raises(
        CheckpointError, match=f"the Arrow file {re.escape(str(state_file))} is damaged"
    ):
        restore()
    state_file.unlink()
    with pytest.raises(
        CheckpointError, match=f"the Arrow file {re.escape(str(state_file))} is missing"
    ):
        restore()
    manifest = Path(sums.directory) / "_task.json"
    manifest.unlink()
    with pytest.raises(CheckpointError, match=f"the file {re.escape(str(manifest))} is missing"):
        restore()
    assert not (tmp_path / "chk" / "part-2").exists()  # refused before anything was recorded


@pytest.mark.slow
def test_retention_over_several_runs_never_deletes_a_savepoint_folder(
    spark: Any, tmp_path: Path
) -> None:
    results = [savepoint_run(spark, tmp_path, new_run=index > 0) for index in range(3)]
    folders = [r.savepoint_path for r in results]
    assert [r.checkpoint_id for r in results] == [1, 2, 3] and len(set(folders)) == 3
    job_folder = tmp_path / "chk" / "part-1"
    assert [c.checkpoint_id for c in list_checkpoints(str(job_folder))] == [3]  # retained: 1
    assert [c.savepoint for c in list_checkpoints(str(job_folder))] == [folders[2]]
    for checkpoint_id, folder in enumerate(folders, 1):
        assert folder is not None and load_checkpoint(folder).checkpoint_id == checkpoint_id
        assert totals(Path(folder)) == final_totals(FIRST)  # each run started afresh
    stored = savepoint_run(spark, tmp_path)  # finished: its stored result, nothing runs
    assert stored.already_finished and stored.savepoint_path == folders[2]


@pytest.mark.slow
def test_the_restart_after_a_failed_commit_commits_the_savepoint_as_checkpoint_n(
    spark: Any, tmp_path: Path
) -> None:
    def sink() -> FileSink:
        return CommitDiesAfterOneFile(str(tmp_path / "out"), str(tmp_path / "marker"))

    with pytest.raises(CommitError, match="failed to commit checkpoint 1"):
        savepoint_run(spark, tmp_path, sink=sink())
    [folder] = (tmp_path / "savepoints").iterdir()
    assert totals(folder) == final_totals(FIRST)  # the savepoint is whole
    result = savepoint_run(spark, tmp_path, sink=sink())
    assert result.resumed and result.checkpoint_id == 1  # the pending commit, not a new run
    assert result.savepoint_path == str(folder)
    assert list((tmp_path / "savepoints").iterdir()) == [folder]  # no second savepoint
    written = ds.dataset(str(tmp_path / "out"), format="parquet").to_table()
    rows = zip(*(written.column(c).to_pylist() for c in ("k", "v", "total")), strict=True)
    assert sorted(rows) == running_sums(FIRST)  # every row exactly once
