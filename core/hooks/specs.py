"""Every hook flintlock calls. The docstrings here are the hook reference.

Lifecycle hooks are called *around* the real call: a ``wrapper=True`` implementation
runs before the step (up to its ``yield``) and after it (the ``yield`` returns or raises
the step's error); a plain implementation runs after the step, a ``tryfirst=True`` plain
one before it. A hook that no plugin implements is skipped and costs nothing. Hooks fire
per phase or per batch, never per record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from flintlock.core.api.functions import Function
    from flintlock.core.events import Watermark
    from flintlock.core.runtime.execution_state import ExecutionState
    from flintlock.core.runtime.operator import StreamOperator
    from flintlock.core.task_info import TaskInfo

PROJECT = "flintlock"
hookspec = pluggy.HookspecMarker(PROJECT)

TaskPhase = Literal[
    "set_initial_state",
    "load_chain",
    "setup",
    "task_init",
    "initialize_state",
    "open",
    "notify_restored",
    "run",
    "finish",
    "snapshot",
    "close",
    "timer_shutdown",
    "task_cleanup",
    "common_cleanup",
]
"""The steps of ``StreamTask.invoke``, in the order a successful run takes them."""


# ---- task lifecycle: around each step of StreamTask.invoke ----


@hookspec
def flintlock_task_invoke_phase(task: TaskInfo, phase: TaskPhase) -> None:
    """Around one step of a subtask's invoke sequence (ARCHITECTURE.md section 3).

    Called once per step and subtask, in the order of ``TaskPhase`` on success; on a
    failure or cancel the cleanup steps run in the interrupted order (timer_shutdown,
    task_cleanup, close, common_cleanup). A wrapper sees the step's error.
    """


@hookspec
def flintlock_task_state_changed(
    task: TaskInfo, previous: ExecutionState, current: ExecutionState
) -> None:
    """After a subtask moves from one execution state to the next.

    CREATED -> DEPLOYING -> INITIALIZING -> RUNNING -> FINISHED, or to CANCELED / FAILED
    from any state before a final one. Observation only; the return value is ignored.
    """


# ---- operator lifecycle: around the real call, per phase or per batch ----


@hookspec
def flintlock_operator_setup(operator: StreamOperator, task: TaskInfo) -> None:
    """Around ``operator.setup(context, output)``; the chain sets up first to last.

    Once per subtask, before any state exists. An operator whose setup was called is
    closed on every path, even if its own setup raised.
    """


@hookspec
def flintlock_operator_initialize_state(
    operator: StreamOperator, task: TaskInfo, restored: bool
) -> None:
    """Around creating and restoring the operator's state and ``initialize_state``.

    Once per subtask, first to last, after setup of all operators; ``restored`` says
    whether the state came from a checkpoint or savepoint.
    """


@hookspec
def flintlock_operator_open(operator: StreamOperator, task: TaskInfo) -> None:
    """Around ``operator.open()``; the chain opens operators last to first.

    Once per subtask, after ``initialize_state``, before the first batch; downstream
    operators are already open, so it may emit.
    """


@hookspec
def flintlock_operator_process_batch(
    operator: StreamOperator, task: TaskInfo, batch: pa.RecordBatch, input_index: int
) -> None:
    """Around ``operator.process_batch(batch)`` (``process_batch1/2`` for two inputs).

    Once per batch, never per record: per-record user methods run inside it.
    """


@hookspec
def flintlock_operator_process_watermark(
    operator: StreamOperator, task: TaskInfo, watermark: Watermark, input_index: int
) -> None:
    """Around ``operator.process_watermark(watermark, input_index)``.

    Once per watermark that reaches the operator; event-time timers fire inside it.
    """


@hookspec
def flintlock_operator_snapshot_state(
    operator: StreamOperator, task: TaskInfo, checkpoint_id: int
) -> None:
    """Around ``operator.snapshot_state`` and writing the operator's state.

    Once per checkpoint, savepoint or final checkpoint; tail to head, as Flink's chain
    snapshots. The operator may still hold data in 2PC transactions; it must not emit.
    """


@hookspec
def flintlock_operator_notify_checkpoint_complete(
    operator: StreamOperator, task: TaskInfo, checkpoint_id: int
) -> None:
    """Around ``operator.notify_checkpoint_complete(checkpoint_id)``.

    After a restore only: right after open, before any data, for the restored checkpoint.
    Commits of 2PC sinks happen on the driver, not here. Tail to head.
    """


@hookspec
def flintlock_operator_notify_checkpoint_aborted(
    operator: StreamOperator, task: TaskInfo, checkpoint_id: int
) -> None:
    """Around ``operator.notify_checkpoint_aborted(checkpoint_id)``.

    After a restore, for each checkpoint above the restored one that did not complete,
    right after the completion notification; lets 2PC writers drop what they prepared.
    """


@hookspec
def flintlock_operator_end_input(
    operator: StreamOperator, task: TaskInfo, input_index: int
) -> None:
    """Around ``operator.end_input(input_index)``: that input will carry no more records.

    On the head when each input really ends (in the order they end); on a chained
    operator right after the previous operator finished. Only when the input ended or
    on drain, never at an epoch end. May emit.
    """


@hookspec
def flintlock_operator_finish(operator: StreamOperator, task: TaskInfo) -> None:
    """Around ``operator.finish()``: flush; nothing may be emitted after it returns.

    Once, first to last, after every input of the operator ended (FLIP-147).
    """


@hookspec
def flintlock_operator_close(operator: StreamOperator, task: TaskInfo) -> None:
    """Around ``operator.close()``: release resources, on success, failure and cancel.

    Once per operator whose setup was called, first to last; a failing close does not
    stop the others from closing.
    """


# ---- user function lifecycle: inside the operator's steps ----


@hookspec
def flintlock_function_set_runtime_context(
    function: Function, operator: StreamOperator, task: TaskInfo
) -> None:
    """Around ``function.set_runtime_context(context)``, inside the operator's setup."""


@hookspec
def flintlock_function_open(function: Function, operator: StreamOperator, task: TaskInfo) -> None:
    """Around ``function.open()``, inside the operator's open."""


@hookspec
def flintlock_function_finish(function: Function, operator: StreamOperator, task: TaskInfo) -> None:
    """Around ``function.finish()``, inside the operator's finish; a sink flushes here."""


@hookspec
def flintlock_function_close(function: Function, operator: StreamOperator, task: TaskInfo) -> None:
    """Around ``function.close()``, inside the operator's close; runs on every path."""


# ---- registration: called once per plugin manager ----


@hookspec
def flintlock_register_task_types(register: Callable[[str, Any], None]) -> None:
    """Offer task types by name, e.g. ``register("one-input", OneInputStreamTask)``.

    A task type is a ``StreamTask`` subclass. A name offered twice is an error.
    """


@hookspec
def flintlock_register_state_backends(register: Callable[[str, Any], None]) -> None:
    """Offer state backends by name, e.g. ``register("hashmap", HashMapStateBackend)``.

    A state backend is a ``StateBackend`` subclass, built with no arguments.
    """


@hookspec
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    """Offer operator factories by name, e.g. ``register("map", MapOperator)``.

    The DataStream API builds even ``map`` and ``filter`` from these names.
    """


@hookspec
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    """Offer sinks by name, e.g. ``register("print", PrintSink)``."""


@hookspec
def flintlock_register_sources(register: Callable[[str, Any], None]) -> None:
    """Offer sources by name, e.g. ``register("delta", DeltaSource)``: the
    ``StreamExecutionEnvironment.from_<name>`` methods build them from the registry."""


# ---- reports: what a plugin object observed in a task, back on the driver ----


@hookspec(firstresult=True)
def flintlock_report_to_driver(task: TaskInfo) -> Any:
    """What this plugin observed in subtask ``task``, for its driver-side copy: JSON-able
    data, or None to send nothing.

    Called on the worker's copy of each plugin object the job was handed (installed
    plugins have no driver-side object to receive it), once per subtask and epoch, after
    the task's common cleanup, so close and the final task state are included.
    """


@hookspec
def flintlock_merge_report(task: str, report: Any) -> None:
    """Take what the worker-side copy of this plugin reported for subtask ``task``
    (``TaskInfo.key``): called on the driver, on the plugin object the job was handed,
    once per report, in the order the epoch's last stage delivered them."""
