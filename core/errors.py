"""Errors that name the task, subtask, operator and phase where something went wrong."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flintlock.core.task_info import TaskInfo


class FlintlockError(Exception):
    """Base class of every error flintlock raises itself."""


class PluginError(FlintlockError):
    """A plugin is missing, offered twice, or does not fit its interface."""


class ChainError(FlintlockError):
    """An operator chain cannot be built for the task type it was given to."""


class SchemaMismatchError(FlintlockError):
    """A per-record function returned a row that does not fit the output schema."""


class EmitAfterFinishError(FlintlockError):
    """An operator emitted a batch or watermark after its finish() returned."""


class ChannelError(FlintlockError):
    """A task received an event that breaks its input protocol (order, target, end)."""


class TaskCanceled(BaseException):
    """Thrown into a running task to cancel it; the task closes and ends CANCELED."""


def tag_operator(error: BaseException, operator_name: str, method: str) -> None:
    """Remember the innermost operator and method an error escaped from.

    Costs nothing unless an error is raised; the task reads the tag to name the operator.
    """
    if getattr(error, "_flintlock_operator", None) is None:
        # exceptions with __slots__ cannot carry the tag
        with contextlib.suppress(AttributeError):
            error._flintlock_operator = (operator_name, method)  # type: ignore[attr-defined]


def operator_tag(error: BaseException) -> tuple[str, str] | None:
    """The (operator, method) an error was tagged with, if any."""
    return getattr(error, "_flintlock_operator", None)


class LifecycleError(FlintlockError):
    """A task failed or was canceled; names task, subtask, operator and phase.

    The original error is the ``__cause__``; errors raised later while closing are
    listed in ``closing_errors`` and in the message.
    """

    def __init__(
        self,
        task: TaskInfo,
        phase: str,
        cause: BaseException,
        operator: str | None = None,
        operator_method: str | None = None,
        operator_position: str | None = None,
        closing_errors: list[tuple[str, BaseException]] | None = None,
    ) -> None:
        self.task = task
        self.subtask_index = task.subtask_index
        self.phase = phase
        self.operator = operator
        self.operator_method = operator_method
        self.canceled = isinstance(cause, TaskCanceled)
        self.closing_errors = closing_errors or []
        where = (
            f"operator '{operator}' failed in {operator_method}"
            if operator
            else (f"task failed in {phase}")
        )
        if self.canceled:
            where = f"task canceled in {phase}"
        lines = [
            where,
            f"  task: {task.task_type} '{task.task_name}', subtask "
            f"{task.subtask_index}/{task.parallelism}, attempt {task.attempt_number}, "
            f"epoch {task.epoch}, phase {phase}",
        ]
        if operator:
            lines.append(f"  operator: '{operator}' ({operator_position})")
        lines.append(f"  caused by: {type(cause).__name__}: {cause}")
        for name, error in self.closing_errors:
            lines.append(f"  also while closing: '{name}' raised {type(error).__name__}: {error}")
        super().__init__("\n".join(lines))
