"""Every error flintlock raises, defined once; users import them from ``flintlock.errors``.

    FlintlockError
    ├─ the program (refused before Spark runs): GraphError (NotPicklableError,
    │  CheckpointDirectoryError), PluginError, ChainError, SideOutputError, EventTimeError,
    │  WindowDefinitionError, MetricError, MetricsUnavailable, SparkSetupError,
    │  JobIdentityError, SinkOutputError
    ├─ a task: LifecycleError (its cause one of SchemaMismatchError, EmitAfterFinishError,
    │  MailboxClosedError, AsyncTimeoutError, ChannelError, KeyColumnError, WindowError,
    │  StateError, StateTypeError, ReadOnlyStateError or the user's own), TaskFailedOnWorker
    ├─ Spark: SparkJobError (PythonTaskError (WorkerImportError), WorkerCrashedError)
    └─ the job's folder: CheckpointError (StorageError, RestoreError, StateSchemaError),
       CommitError (CommittableError), JobLeaseError (LeaseLostError), JobControlError,
       JobCanceled, RunLogError
    ├─ a sink's tests: SinkConformanceError (also an AssertionError)
    TaskCanceled (a BaseException: thrown into a task to cancel it)

Some are also the builtin error a caller would catch: StorageError is an OSError,
WindowDefinitionError, MetricError and StateError a ValueError, AsyncTimeoutError a
TimeoutError, StateTypeError and ReadOnlyStateError a TypeError, SinkConformanceError an
AssertionError (pytest reports it as a failed test).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from flintlock.core.failure_report import FailureReport, offending_record, user_traceback

if TYPE_CHECKING:
    from flintlock.core.task_info import TaskInfo


class FlintlockError(Exception):
    """Base class of every error flintlock raises itself."""


class TaskCanceled(BaseException):
    """Thrown into a running task to cancel it; the task closes and ends CANCELED."""


# ---- the program: refused where it is defined, or before Spark starts ----


class GraphError(FlintlockError):
    """A DataStream program cannot be turned into a runnable graph."""


class NotPicklableError(GraphError):
    """An operator, function, sink or plugin of the job cannot be shipped to the workers."""


class CheckpointDirectoryError(GraphError):
    """The checkpoint directory cannot be created or written."""


class PluginError(FlintlockError):
    """A plugin is missing, offered twice, or does not fit its interface."""


class ChainError(FlintlockError):
    """An operator chain cannot be built for the task type it was given to."""


class SideOutputError(FlintlockError):
    """A side output is misused: not an OutputTag, or one name with two schemas."""


class EventTimeError(FlintlockError):
    """Event time is misused: a timestamp column missing or of a wrong type, a bad
    WatermarkStrategy or generator."""


class WindowDefinitionError(FlintlockError, ValueError):
    """A window assigner was given a size, slide, gap or offset it cannot use (raised
    where the window is defined, not when the job runs)."""


class MetricError(FlintlockError, ValueError):
    """A metric name given twice with two kinds, or an empty one."""


class MetricsUnavailable(FlintlockError):
    """Prometheus output was asked for and cannot be given: ``prometheus_client`` is not
    installed, or the port is taken."""


class SparkSetupError(FlintlockError):
    """Spark cannot start here; the message says what to install or set."""


class JobIdentityError(FlintlockError):
    """A job name cannot be used, or a job folder belongs to another job."""


class SinkOutputError(FlintlockError):
    """A sink's output may not be written by this run (its output mode refuses it)."""


# ---- a task: raised in a subtask, the cause of its LifecycleError ----


class SchemaMismatchError(FlintlockError):
    """A per-record function returned a row that does not fit the output schema."""


class EmitAfterFinishError(FlintlockError):
    """An operator emitted a batch or watermark after its finish() returned."""


class AsyncTimeoutError(FlintlockError, TimeoutError):
    """An async call (with its retries) took longer than the operator's timeout."""


class MailboxClosedError(FlintlockError):
    """A mail put after its operator's finish or after the task's operators closed."""


class ChannelError(FlintlockError):
    """A task received an event that breaks its input protocol (order, target, end)."""


class KeyColumnError(FlintlockError):
    """The rows reaching a ``key_by`` lack its key column (a ``map`` without an output
    schema returned other columns); raised where the rows are routed, naming the key_by."""


class WindowError(FlintlockError):
    """A window operator got a row or a result it cannot handle."""


class StateError(FlintlockError, ValueError):
    """A state is asked for in a way that contradicts how it was declared or restored."""


class StateTypeError(FlintlockError, TypeError):
    """A state was given a value its declared ``arrow_type`` cannot hold."""


class ReadOnlyStateError(FlintlockError, TypeError):
    """State written where it may only be read (broadcast state outside the broadcast side)."""


class TaskFailedOnWorker(FlintlockError):
    """A subtask failed on a Spark worker; its message carries the FailureReport, from
    which the driver rebuilds the LifecycleError."""


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

    def __reduce__(self) -> tuple[object, tuple[FailureReport]]:
        """Pickled as its report (cause and task stay behind), rebuilt as on the driver."""
        return type(self).from_report, (self.report,)

    def _take(self, report: FailureReport) -> None:
        self.report = report
        self.subtask_index = report.subtask_index
        self.phase = report.phase
        self.operator = report.operator
        self.operator_method = report.operator_method
        self.canceled = report.canceled
        self.record = report.record
        FlintlockError.__init__(self, report.message())


# ---- Spark: its job failed for a reason no flintlock task reported ----


class SparkJobError(FlintlockError):
    """The epoch's Spark job failed for a reason no flintlock task reported."""

    def __init__(self, message: str, spark_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.spark_error = spark_error

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled without ``spark_error``: a Py4J error holds this driver's JVM link."""
        state = {k: v for k, v in vars(self).items() if k != "spark_error"}
        return type(self), self.args, state


class PythonTaskError(SparkJobError):
    """Python code that is not a flintlock operator raised in a Spark task (a UDF of the
    input DataFrame, a worker that cannot import a module); the message leads with it."""


class WorkerImportError(PythonTaskError):
    """The Python workers cannot import a module the job's code uses: the job's plan (its
    functions, cloudpickled) cannot be loaded in a Spark task."""


class WorkerCrashedError(SparkJobError):
    """A Python worker died (killed, segfault) while it ran a subtask; names the subtask."""


# ---- the job's folder: checkpoints, commits, the lease, control, the run log ----


class CheckpointError(FlintlockError):
    """A checkpoint cannot complete or be read (missing acknowledgement, damaged metadata,
    another job's folder); the message names the checkpoint and the file."""


class StorageError(CheckpointError, OSError):
    """A read or write of checkpoint storage failed for good (a transient error retried
    until it persisted, or another I/O error); the message names the file. Also an
    OSError, so code that handles a failed write of its own file still does."""


class RestoreError(CheckpointError):
    """A job cannot be restored from a checkpoint or savepoint as asked (state of an
    operator it no longer has, another max parallelism); the message names what."""


class StateSchemaError(CheckpointError):
    """Restored state does not fit the state the job declares now."""


class CommitError(FlintlockError):
    """A sink's commit failed; the job is not finished until it succeeds."""


class CommittableError(CommitError):
    """A committable does not match what was staged (a file truncated, missing or changed).

    Starting again cannot fix it: the message says what the user can do instead."""


class JobLeaseError(FlintlockError):
    """Another driver runs the job: a start is refused while its lease is fresh (the
    message names the holder's run, host and pid)."""


class LeaseLostError(JobLeaseError):
    """The running driver lost its lease (taken over, deleted or not renewed in time): it
    stops before it completes a checkpoint, commits or writes the job's result."""


class JobControlError(FlintlockError):
    """A savepoint, stop or status request could not be made or was not carried out."""


class JobCanceled(FlintlockError):
    """The job was canceled on its driver (a second Ctrl-C or SIGTERM, or its Spark job
    canceled: the caller's job group or tag, Spark's UI); the result store records
    CANCELED and the next start continues from the last checkpoint."""

    by_signal = False
    """True if a stop signal canceled it (the message names the signal)."""


class RunLogError(FlintlockError):
    """A job's run log cannot be read (a damaged entry); the message names the file."""


class SinkConformanceError(FlintlockError, AssertionError):
    """A 2PC sink failed a scenario of the conformance kit (``flintlock.testing``): the
    message names the sink, the scenario and what was wrong (duplicate, missing or
    unexpected ids, or what the sink left behind)."""
