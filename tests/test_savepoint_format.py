"""Relocatable savepoints in the checkpoint format, with harnesses and real files (no
Spark): paths relative to the file that records them, a savepoint's own metadata, moved
folders that restore at another parallelism, old full-path checkpoints, retention."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from flintlock import CheckpointError, OneInputStreamOperator, ValueStateDescriptor
from flintlock.checkpoints import list_checkpoints, load_checkpoint, read_state
from flintlock.cli import main
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.paths import relative_path, resolve_path
from flintlock.core.checkpoint.savepoints import new_savepoint_root
from flintlock.core.checkpoint.snapshots import TaskAcknowledgement, TaskSnapshot
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.exchange.key_groups import key_group_of, subtask_for_key_group
from flintlock.testing import OneInputHarness, rescale

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])
ROWS = [{"k": i * 5 % 17, "v": i} for i in range(400)]


class RunningSum(OneInputStreamOperator):
    """Each row with the running sum of ``v`` of its key (keyed ValueState 'sum')."""

    key_column = "k"

    def __init__(self) -> None:
        super().__init__("sums")

    def initialize_state(self) -> None:
        self.sums = self.context.keyed_state(ValueStateDescriptor("sum", pa.int64(), default=0))

    def process_batch(self, batch: pa.RecordBatch) -> None:
        totals = []
        for k, v in zip(batch.column("k").to_pylist(), batch.column("v").to_pylist(), strict=True):
            self.set_current_key(k)
            self.sums.update(self.sums.value() + v)
            totals.append(self.sums.value())
        self.output.emit(batch.append_column("total", pa.array(totals, pa.int64())))


def running_sums(rows: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[tuple]:
    """Plain Python: (k, v, running total) for ``rows``, continuing the sums of ``before``."""
    totals: dict[int, int] = {}
    for row in before:
        totals[row["k"]] = totals.get(row["k"], 0) + row["v"]
    out = []
    for row in rows:
        totals[row["k"]] = totals.get(row["k"], 0) + row["v"]
        out.append((row["k"], row["v"], totals[row["k"]]))
    return sorted(out)


def final_totals(rows: list[dict[str, Any]]) -> dict[int, int]:
    totals: dict[int, int] = {}
    for row in rows:
        totals[row["k"]] = totals.get(row["k"], 0) + row["v"]
    return totals


def run_epoch(
    storage: CheckpointStorage,
    rows: list[dict[str, Any]],
    parallelism: int,
    checkpoint_id: int,
    snapshot_root: str | None = None,
    old: list[TaskSnapshot] | None = None,
) -> tuple[list[TaskAcknowledgement], list[tuple]]:
    """One epoch of subtasks at ``parallelism`` (a row to its key group's owner); returns
    the acknowledgements (through JSON, as the driver reads them) and the rows emitted."""
    acks, output = [], []
    for subtask in range(parallelism):
        harness = OneInputHarness(
            RunningSum(),
            parallelism=parallelism,
            subtask_index=subtask,
            storage=storage,
            snapshot_root=snapshot_root,
            restore_from=rescale(old, subtask, parallelism) if old else None,
            epoch=checkpoint_id,
        )
        owner = [
            r
            for r in rows
            if subtask_for_key_group(key_group_of(r["k"]), parallelism, 128) == subtask
        ]
        harness.open()
        if owner:
            harness.process_records(owner, schema=SCHEMA)
        harness.checkpoint(checkpoint_id, kind="savepoint" if snapshot_root else "checkpoint")
        assert harness.acknowledgement is not None
        acks.append(TaskAcknowledgement.from_json(harness.acknowledgement.to_json()))
        output += [(r["k"], r["v"], r["total"]) for r in harness.output_rows()]
    return acks, sorted(output)


def job(tmp_path: Path) -> CheckpointCoordinator:
    storage = CheckpointStorage.from_uri(str(tmp_path / "chk"))
    folder = JobFolder(storage, "sums")
    folder.open()
    return CheckpointCoordinator(folder)


def take_savepoint(coordinator: CheckpointCoordinator, tmp_path: Path, checkpoint_id: int) -> str:
    """Savepoint ``checkpoint_id`` of the first half of ROWS at parallelism 2; its folder."""
    root = new_savepoint_root(coordinator.storage, str(tmp_path / "savepoints"), checkpoint_id)
    acks, _ = run_epoch(coordinator.storage, ROWS[:200], 2, checkpoint_id, root)
    expected = {("sums", 0), ("sums", 1)}
    details = {"operators": {"sums": {"uid": "sums"}}, "max_parallelism": 128}
    coordinator.complete(checkpoint_id, f"run{checkpoint_id}", True, acks, expected, details, root)
    return root


def test_recorded_paths_are_relative_under_their_folder_and_full_elsewhere() -> None:
    assert relative_path("/a/b", "/a/b/c/d.arrow") == "./c/d.arrow"
    assert relative_path("/a/b/", "/a/b") == "."
    assert relative_path("/a/b", "/a/bc/d.arrow") == "/a/bc/d.arrow"  # not under it
    assert relative_path("bucket/sp", "bucket/sp/x") == "./x"  # object store paths too
    assert resolve_path("/moved/here", "./c/d.arrow") == "/moved/here/c/d.arrow"
    assert resolve_path("/moved/here", ".") == "/moved/here"
    assert resolve_path("/moved/here", "/old/full/path.arrow") == "/old/full/path.arrow"
    for damaged in ("./../x", "./", "./a//b", "./a/./b"):
        with pytest.raises(ValueError, match="does not name a file under its folder"):
            resolve_path("/moved/here", damaged)


def test_a_savepoint_folder_records_only_relative_paths(tmp_path: Path) -> None:
    coordinator = job(tmp_path)
    root = take_savepoint(coordinator, tmp_path, 1)
    assert Path(root).parent == tmp_path / "savepoints"
    assert Path(root).name.startswith("savepoint-1-") and len(Path(root).name) == 18
    own = json.loads((Path(root) / "_metadata.json").read_text())
    assert own["kind"] == "savepoint" and own["checkpoint_id"] == 1 and "committables" not in own
    paths = [a["manifest_path"] for a in own["acknowledgements"]]
    assert sorted(paths) == ["./sums/0-0/_task.json", "./sums/1-0/_task.json"]
    for path in paths:
        manifest = json.loads((Path(root) / path[2:]).read_text())
        assert manifest["directory"] == "." and manifest["kind"] == "savepoint"
        assert manifest["operators"]["sums"]["keyed"] == [
            {"name": "sum", "kind": "value", "path": "./sums/keyed-sum.arrow", "mode": "split"}
        ]
    # the job's own entry: checkpoint 1 as its recovery sees it, naming the savepoint
    entry = json.loads(
        (tmp_path / "chk" / "sums" / "checkpoints" / "chk-1" / "_metadata.json").read_text()
    )
    assert entry["savepoint"] == root and entry["kind"] == "savepoint"
    assert sorted(a["manifest_path"] for a in entry["acknowledgements"]) == [
        f"{root}/sums/0-0/_task.json",
        f"{root}/sums/1-0/_task.json",
    ]
    latest = coordinator.latest()
    assert latest is not None and (latest.checkpoint_id, latest.savepoint) == (1, root)
    assert not (tmp_path / "chk" / "sums" / "run1").exists()  # nothing under the run's folder


def test_a_moved_savepoint_restores_at_another_parallelism(tmp_path: Path) -> None:
    root = take_savepoint(job(tmp_path), tmp_path, 1)
    moved = tmp_path / "elsewhere" / "kept"
    shutil.copytree(root, moved)
    shutil.rmtree(root)
    shutil.rmtree(tmp_path / "chk")
    state = read_state(str(moved), "sums", "sum")
    assert dict(zip(*state.select(["key", "value"]).to_pydict().values(), strict=True)) == (
        final_totals(ROWS[:200])
    )
    checkpoint = load_checkpoint(str(moved))
    assert (checkpoint.kind, checkpoint.savepoint, checkpoint.path) == (
        "savepoint",
        str(moved),
        str(moved),
    )
    assert {s.directory for s in checkpoint.subtasks} == {f"{moved}/sums/0-0", f"{moved}/sums/1-0"}
    storage = CheckpointStorage.from_uri(str(tmp_path / "new"))
    _, output = run_epoch(storage, ROWS[200:], 3, 2, old=checkpoint.subtasks)
    assert output == running_sums(ROWS[200:], ROWS[:200])


def test_missing_and_damaged_files_of_a_moved_savepoint_are_named_where_they_are(
    tmp_path: Path,
) -> None:
    root = take_savepoint(job(tmp_path), tmp_path, 1)
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    shutil.rmtree(root)
    state_file = moved / "sums" / "1-0" / "sums" / "keyed-sum.arrow"
    state_file.unlink()
    with pytest.raises(CheckpointError, match=f"the Arrow file {state_file} is missing"):
        read_state(str(moved), "sums", "sum")
    manifest = moved / "sums" / "0-0" / "_task.json"
    document = json.loads(manifest.read_text())
    document["operators"]["sums"]["keyed"][0]["path"] = "./../../1-0/sums/keyed-sum.arrow"
    manifest.write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=f"the snapshot manifest {manifest} is damaged"):
        load_checkpoint(str(moved))
    manifest.unlink()
    with pytest.raises(CheckpointError, match=f"the file {manifest} is missing"):
        load_checkpoint(str(moved))


def test_checkpoints_written_with_full_paths_still_read(tmp_path: Path) -> None:
    coordinator = job(tmp_path)
    acks, _ = run_epoch(coordinator.storage, ROWS[:200], 2, 1)
    coordinator.complete(1, "run1", True, acks, {("sums", 0), ("sums", 1)})
    chk1 = tmp_path / "chk" / "sums" / "checkpoints" / "chk-1"
    for ack in acks:  # rewrite each manifest as flintlock wrote them before: full paths
        path = Path(ack.manifest_path)
        relative = TaskSnapshot.from_json(json.loads(path.read_text()), str(path.parent))
        old = asdict(relative)
        old["operators"] = {k: asdict(v) for k, v in relative.operators.items()}
        assert old["operators"]["sums"]["keyed"][0]["path"] == f"{path.parent}/sums/keyed-sum.arrow"
        path.write_text(json.dumps(old))
    state = read_state(str(chk1), "sums", "sum")
    assert dict(zip(*state.select(["key", "value"]).to_pydict().values(), strict=True)) == (
        final_totals(ROWS[:200])
    )


def test_a_snapshot_outside_the_savepoint_folder_is_refused(tmp_path: Path) -> None:
    coordinator = job(tmp_path)
    acks, _ = run_epoch(coordinator.storage, ROWS[:10], 1, 1)  # written under the run's folder
    root = str(tmp_path / "savepoints" / "savepoint-1-abcdef")
    with pytest.raises(CheckpointError, match=f"outside the savepoint's folder {root}"):
        coordinator.complete(1, "run1", True, acks, {("sums", 0)}, None, root)
    assert coordinator.latest() is None and not Path(root).exists()


def test_retention_deletes_a_savepoints_entry_never_its_folder(tmp_path: Path) -> None:
    coordinator = job(tmp_path)
    savepoints = []
    for checkpoint_id in (1, 2, 3, 4):  # savepoints 1 and 3, checkpoints 2 and 4
        if checkpoint_id % 2:
            savepoints.append(take_savepoint(coordinator, tmp_path, checkpoint_id))
        else:
            acks, _ = run_epoch(coordinator.storage, ROWS[:200], 2, checkpoint_id)
            expected = {("sums", 0), ("sums", 1)}
            coordinator.complete(checkpoint_id, f"run{checkpoint_id}", True, acks, expected)
        assert coordinator.retain(1) == ([checkpoint_id - 1] if checkpoint_id > 1 else [])
    assert [c.checkpoint_id for c in list_checkpoints(str(tmp_path / "chk" / "sums"))] == [4]
    assert not (tmp_path / "chk" / "sums" / "run2").exists()  # a checkpoint's files go
    for checkpoint_id, root in zip((1, 3), savepoints, strict=True):
        assert load_checkpoint(root).checkpoint_id == checkpoint_id  # whole, still readable
        assert read_state(root, "sums", "sum").num_rows == len(final_totals(ROWS[:200]))


def test_the_cli_lists_and_shows_a_moved_savepoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = take_savepoint(job(tmp_path), tmp_path, 1)
    assert main(["checkpoints", "list", str(tmp_path / "chk" / "sums")]) == 0
    listed = capsys.readouterr().out.split()
    assert listed[:6] == ["chk-1", "sums", "run", "run1", "final", "pending"]
    assert listed[-2:] == ["savepoint", root]
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    assert main(["checkpoints", "list", str(moved)]) == 0
    listed = capsys.readouterr().out.split()
    assert listed[:8] == ["chk-1", "sums", "run", "run1", "final", "-", "2", "subtasks"]
    assert listed[8:] == [str(moved), "savepoint", str(moved)]
    assert main(["checkpoints", "show", str(moved)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["kind"], shown["savepoint"], shown["path"]) == (
        "savepoint",
        str(moved),
        str(moved),
    )
    assert shown["operators"][0]["states"][0]["files"] == 2


def test_a_savepoint_directory_on_another_file_system_is_refused(tmp_path: Path) -> None:
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path))
    with pytest.raises(CheckpointError, match="is on a _MockFileSystem, the job's checkpoint"):
        new_savepoint_root(storage, "mock:///savepoints", 1)
    relative = new_savepoint_root(storage, "savepoints", 7)  # a relative local path: made full
    assert relative.startswith(f"{Path.cwd()}/savepoints/savepoint-7-")


def test_a_savepoint_whose_job_entry_cannot_be_written_is_not_left_behind(tmp_path: Path) -> None:
    coordinator = job(tmp_path)
    root = new_savepoint_root(coordinator.storage, str(tmp_path / "savepoints"), 1)
    acks, _ = run_epoch(coordinator.storage, ROWS[:20], 1, 1, root)
    entry = tmp_path / "chk" / "sums" / "checkpoints" / "chk-1" / "_metadata.json"
    entry.mkdir(parents=True)  # a folder in the way: the job's entry cannot be renamed there
    with pytest.raises(CheckpointError, match=f"the savepoint 1 cannot be written to {entry}"):
        coordinator.complete(1, "run1", True, acks, {("sums", 0)}, None, root)
    assert not (Path(root) / "_metadata.json").exists()  # no savepoint of a failed checkpoint
    with pytest.raises(CheckpointError, match=r"neither a checkpoint .* nor a job's folder"):
        load_checkpoint(root)
