"""Errors that name the task, subtask, operator and phase where something went wrong."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from flintlock.core.failure_report import FailureReport, offending_record, user_traceback

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


class EventTimeError(FlintlockError):
    """Event time is misused: a timestamp column missing or of a wrong type, a bad
    WatermarkStrategy or generator."""


class ChannelError(FlintlockError):
    """A task received an event that breaks its input protocol (order, target, end)."""


class KeyColumnError(FlintlockError):
    """The rows reaching a ``key_by`` lack its key column (a ``map`` without an output
    schema returned other columns); raised where the rows are routed, naming the key_by."""


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
    """A task failed or was canceled; names job, checkpoint, task, subtask, attempt,
    operator and phase, the user's own traceback lines and the offending record.

    In the task, the original error is the ``__cause__``; errors raised later while
    closing are listed in ``closing_errors`` and in the message. On the driver it is
    rebuilt from the ``report`` a Spark task sent (``LifecycleError.from_report``).
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
        self.task: TaskInfo | None = task
        self.closing_errors = closing_errors or []
        report = FailureReport(
            job_name=task.job_name,
            run_id=task.run_id,
            checkpoint_id=task.epoch,
            task_name=task.task_name,
            task_type=task.task_type,
            subtask_index=task.subtask_index,
            parallelism=task.parallelism,
            attempt_number=task.attempt_number,
            attempt_id=task.attempt_id,
            phase=phase,
            cause_type=type(cause).__name__,
            cause_message=str(cause),
            operator=operator,
            operator_method=operator_method,
            operator_position=operator_position,
            canceled=isinstance(cause, TaskCanceled),
            user_traceback=user_traceback(cause),
            record=offending_record(cause),
            closing_errors=[
                f"'{name}' raised {type(error).__name__}: {error}"
                for name, error in self.closing_errors
            ],
        )
        self._take(report)

    @classmethod
    def from_report(cls, report: FailureReport) -> LifecycleError:
        """The error as the task raised it, rebuilt on the driver from its report."""
        error = cls.__new__(cls)
        error.task = None
        error.closing_errors = []
        error._take(report)
        return error

    def _take(self, report: FailureReport) -> None:
        self.report = report
        self.subtask_index = report.subtask_index
        self.phase = report.phase
        self.operator = report.operator
        self.operator_method = report.operator_method
        self.canceled = report.canceled
        self.record = report.record
        FlintlockError.__init__(self, report.message())
