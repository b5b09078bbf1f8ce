"""A subtask's execution state, as Flink's ExecutionState, with its legal moves.

Plugins observe the moves through ``flintlock_task_state_changed``, so a move out of
order is refused here (``check_transition``) rather than reported as if it happened."""

from __future__ import annotations

import enum


class ExecutionState(enum.Enum):
    """Where a subtask is in its life; observable through ``flintlock_task_state_changed``."""

    CREATED = "CREATED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        """True for FINISHED, CANCELED and FAILED: no move leaves them."""
        return self in _TERMINAL


_TERMINAL = {ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED}

_FORWARD = [
    ExecutionState.CREATED,
    ExecutionState.DEPLOYING,
    ExecutionState.INITIALIZING,
    ExecutionState.RUNNING,
    ExecutionState.FINISHED,
]


def check_transition(previous: ExecutionState, current: ExecutionState) -> None:
    """Raise if a subtask may not move from ``previous`` to ``current``."""
    if previous.is_terminal:
        raise RuntimeError(f"task already {previous.value}, cannot become {current.value}")
    if current in (ExecutionState.CANCELED, ExecutionState.FAILED):
        return
    if _FORWARD.index(current) != _FORWARD.index(previous) + 1:
        raise RuntimeError(f"illegal task state change {previous.value} -> {current.value}")
