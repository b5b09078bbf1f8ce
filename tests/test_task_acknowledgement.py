"""One acknowledgement type on both sides: the task sends a ``TaskAcknowledgement`` as
JSON, the driver reads it back strictly, and checkpoint metadata keeps the JSON it always
recorded, so checkpoints written before still restore."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
from lifecycle_ops import Passthrough, batch

from flintlock import CheckpointError
from flintlock.checkpoints import load_checkpoint
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.snapshots import TaskAcknowledgement
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.testing import OneInputHarness

LATER_FIELDS = ("records_in", "duration_seconds", "finished_at", "lifecycle_phases", "metrics")
"""Fields added to the acknowledgement after the first checkpoint format."""


def sent(storage: CheckpointStorage) -> TaskAcknowledgement:
    """A subtask's real acknowledgement of checkpoint 1, as its writer sends it."""
    harness = OneInputHarness(Passthrough("op"), storage=storage)
    harness.open()
    harness.process_batch(batch(1, 2, 3))
    harness.complete(checkpoint_id=1)
    assert harness.acknowledgement is not None
    return replace(harness.acknowledgement, vertex=0, lifecycle_phases={"open": [1.0, 2.0]})


def completed(tmp_path: Path) -> tuple[CheckpointCoordinator, TaskAcknowledgement, Path]:
    """Checkpoint 1 of job 'sums' completed from one acknowledgement read through JSON."""
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path / "chk")), "sums")
    folder.open()
    coordinator = CheckpointCoordinator(folder)
    ack = sent(folder.storage)
    read = TaskAcknowledgement.from_json(json.loads(json.dumps(ack.to_json())))
    coordinator.complete(1, "run1", True, [read], {(ack.task_name, 0)})
    return coordinator, ack, Path(folder.checkpoint_dir(1)) / "_metadata.json"


def rewrite(metadata: Path, change: Any) -> None:
    """Pass the metadata's one acknowledgement through ``change`` (a dict in place)."""
    document = json.loads(metadata.read_text())
    change(document["acknowledgements"][0])
    metadata.write_text(json.dumps(document))


def test_the_driver_reads_back_exactly_what_the_task_sent(tmp_path: Path) -> None:
    ack = sent(CheckpointStorage.from_uri(str(tmp_path)))
    assert ack.records_in == 3 and ack.finished and ack.manifest_path.endswith("_task.json")
    assert TaskAcknowledgement.from_json(json.loads(json.dumps(ack.to_json()))) == ack
    assert "vertex" not in replace(ack, vertex=None).to_json()  # as before it left its task
    # its manifest's document rides along, so the run's next epoch reads no file back
    assert ack.manifest == json.loads(Path(ack.manifest_path).read_text())


def test_a_run_restores_from_the_manifests_its_acknowledgements_carried(tmp_path: Path) -> None:
    coordinator, ack, metadata = completed(tmp_path)
    storage = coordinator.storage
    before = load_checkpoint(str(metadata.parent), storage, own_job=True)
    Path(ack.manifest_path).unlink()  # only the acknowledgement has it now
    after = load_checkpoint(str(metadata.parent), storage, own_job=True, sent=[ack])
    assert after.subtasks == before.subtasks and after.subtasks[0].operators
    with pytest.raises(CheckpointError, match=f"{ack.manifest_path} is missing"):
        load_checkpoint(str(metadata.parent), storage, own_job=True)  # read: the file


def test_metadata_records_each_acknowledgement_as_the_task_sent_it(tmp_path: Path) -> None:
    coordinator, ack, metadata = completed(tmp_path)
    recorded = json.loads(metadata.read_text())["acknowledgements"]
    # the ACK message's JSON, key for key: what every checkpoint recorded (keys sorted)
    sent_fields = asdict(replace(ack, vertex=None))
    assert sent_fields.pop("manifest") is not None  # the message's copy: never in metadata
    assert recorded == [{**sent_fields, "vertex": 0}]
    latest = coordinator.latest()
    assert latest is not None and latest.acknowledgements == [ack]
    assert latest.finished_vertices() == {ack.task_name: 1}


def test_a_checkpoint_from_before_the_later_fields_still_reads(tmp_path: Path) -> None:
    coordinator, ack, metadata = completed(tmp_path)
    rewrite(metadata, lambda old: [old.pop(name) for name in LATER_FIELDS])
    latest = coordinator.latest()
    assert latest is not None
    (read,) = latest.acknowledgements
    assert (read.records_out, read.records_in, read.finished_at, read.metrics) == (
        ack.records_out,
        0,
        None,
        {},
    )
    assert latest.finished_vertices() == {ack.task_name: 1}  # finished here, in checkpoint 1
    assert load_checkpoint(str(metadata.parent)).checkpoint_id == 1


def test_a_damaged_acknowledgement_in_metadata_names_the_file_and_the_subtask(
    tmp_path: Path,
) -> None:
    coordinator, ack, metadata = completed(tmp_path)
    rewrite(metadata, lambda old: old.pop("size_bytes"))
    damaged = f"{metadata} is damaged: the acknowledgement of '{ack.task_name}' subtask 0 lacks"
    with pytest.raises(CheckpointError, match=f"{damaged} 'size_bytes'"):
        coordinator.latest()
    with pytest.raises(CheckpointError, match=f"{damaged} 'size_bytes'"):
        load_checkpoint(str(metadata.parent))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"finished": "yes"}, r"'v' subtask 2 has 'finished' = 'yes', not of type bool"),
        ({"records_out": True}, r"'v' subtask 2 has 'records_out' = True, not of type int"),
        ({"watermark": 5}, r"'v' subtask 2 has unknown fields \['watermark'\]"),
        ({"task_name": None}, r"of None subtask 2 has 'task_name' = None"),
    ],
)
def test_a_damaged_acknowledgement_message_is_a_checkpoint_error_naming_the_subtask(
    change: dict[str, Any], message: str
) -> None:
    document = {
        "checkpoint_id": 4,
        "task_name": "v",
        "subtask_index": 2,
        "attempt_id": 9,
        "manifest_path": "/chk/v/2-9/_task.json",
        "size_bytes": 10,
        "finished": False,
        "committables": {},
        "records_out": 1,
    }
    assert TaskAcknowledgement.from_json(document).attempt_id == 9  # the first format
    with pytest.raises(CheckpointError, match=message):
        TaskAcknowledgement.from_json({**document, **change})
    missing = {k: v for k, v in document.items() if k != "subtask_index"}
    with pytest.raises(CheckpointError, match="'v' subtask <no subtask_index> lacks 'subtask_"):
        TaskAcknowledgement.from_json(missing)
    with pytest.raises(CheckpointError, match="no JSON object"):
        TaskAcknowledgement.from_json([document])
