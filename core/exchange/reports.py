"""The lifecycle phase report a subtask sends the driver after its cleanup, typed on both
sides: its phases' wall-clock times, which the driver joins to its acknowledgement by
subtask attempt. It travels as JSON in the message protocol's REPORT kind, beside the
plugins' reports (``core/hooks/reports.py``), told apart by its ``lifecycle_phases``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flintlock.core.errors import ChannelError


@dataclass(frozen=True)
class PhaseReport:
    """One subtask attempt's lifecycle phases: name -> [start, end] (wall clock)."""

    task_name: str
    subtask_index: int
    attempt_id: int
    lifecycle_phases: dict[str, list[float]]

    @property
    def attempt(self) -> tuple[str, int, int]:
        """The (task, subtask, attempt) its acknowledgement carries too."""
        return self.task_name, self.subtask_index, self.attempt_id

    def to_json(self) -> dict[str, Any]:
        return {
            "lifecycle_phases": self.lifecycle_phases,
            "task_name": self.task_name,
            "subtask_index": self.subtask_index,
            "attempt_id": self.attempt_id,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> PhaseReport:
        """The report a REPORT message carries; a damaged one is a ChannelError."""
        try:
            phases = document["lifecycle_phases"]
            return cls(
                str(document["task_name"]),
                int(document["subtask_index"]),
                int(document["attempt_id"]),
                {str(name): [float(t) for t in times] for name, times in phases.items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ChannelError(f"a damaged phase report ({error}): {document!r:.300}") from None

    @staticmethod
    def carried_by(document: Any) -> bool:
        """True if a REPORT message's JSON is a phase report (not a plugin's)."""
        return isinstance(document, dict) and "lifecycle_phases" in document
