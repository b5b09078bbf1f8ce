"""Acknowledgements as the driver reads them, for tests that complete checkpoints by hand."""

from __future__ import annotations

from typing import Any

from flintlock.core.checkpoint.snapshots import TaskAcknowledgement


def acknowledgement(
    task: str = "v", subtask: int = 0, checkpoint_id: int = 1, **fields: Any
) -> TaskAcknowledgement:
    """Subtask ``subtask`` of ``task`` acknowledging ``checkpoint_id``; ``fields`` set the
    rest (an unfinished subtask with no snapshot, sizes or committables by default)."""
    defaults: dict[str, Any] = {
        "attempt_id": 0,
        "manifest_path": f"/nowhere/{task}/{subtask}-0/_task.json",
        "size_bytes": 0,
        "finished": False,
    }
    return TaskAcknowledgement(
        checkpoint_id=checkpoint_id,
        task_name=task,
        subtask_index=subtask,
        **{**defaults, **fields},
    )
