"""Retention: a job keeps its newest K completed checkpoints; older ones (metadata and
snapshot files) are deleted, incomplete ones are left alone. Real files, no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from acknowledgements import acknowledgement

from flintlock.checkpoints import list_checkpoints
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage


def completed_checkpoint(coordinator: CheckpointCoordinator, checkpoint_id: int) -> Path:
    """Checkpoint ``checkpoint_id`` of its own run: one subtask's snapshot file, then metadata."""
    storage, folder = coordinator.storage, coordinator.folder
    run_id = f"run{checkpoint_id}"
    snapshot = f"{folder.run_dir(run_id)}/chk-{checkpoint_id}/op/0-7"
    storage.write_table(f"{snapshot}/op/keyed-s.arrow", pa.table({"value": [checkpoint_id]}))
    storage.write_json(f"{snapshot}/_task.json", {})
    ack = acknowledgement("op", 0, checkpoint_id, manifest_path=f"{snapshot}/_task.json")
    coordinator.complete(checkpoint_id, run_id, True, [ack], {("op", 0)})
    return Path(snapshot)


def test_the_newest_k_completed_checkpoints_are_kept(tmp_path: Path) -> None:
    storage = CheckpointStorage.from_uri(str(tmp_path))
    folder = JobFolder(storage, "kept")
    folder.open()
    coordinator = CheckpointCoordinator(folder)
    snapshots = [completed_checkpoint(coordinator, n) for n in (1, 2, 3)]
    incomplete = tmp_path / "kept" / "checkpoints" / "chk-4"
    incomplete.mkdir()  # a run that died before its metadata: not a completed checkpoint
    assert coordinator.retain(2) == [1]
    assert [c.checkpoint_id for c in list_checkpoints(str(tmp_path / "kept"))] == [2, 3, 4]
    assert not snapshots[0].exists() and snapshots[1].exists() and snapshots[2].exists()
    assert incomplete.exists()
    assert coordinator.retain(1) == [2]
    assert coordinator.retain(1) == []
    latest = coordinator.latest()
    assert latest is not None and latest.checkpoint_id == 3
