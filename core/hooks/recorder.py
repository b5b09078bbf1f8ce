"""A plugin that records every lifecycle hook call per subtask, in order (for tests).

The lifecycle order is the contract every test checks, and every lifecycle step is a hook
called around the real call, so a plain plugin can see the order the task really ran in:
the tests assert on what it recorded rather than on a mocked task."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Iterable
from typing import TYPE_CHECKING

from flintlock.core.hooks.manager import hookimpl

if TYPE_CHECKING:
    from flintlock.core.events import Watermark
    from flintlock.core.runtime.execution_state import ExecutionState
    from flintlock.core.runtime.operator import StreamOperator
    from flintlock.core.task_info import TaskInfo

Call = tuple[str | int, ...]
"""One recorded call: the hook's short name, its subject, then ints (ids, indexes)."""
Wrapped = Generator[None, object, object]
"""A wrapper hook: records, then hands on what the wrapped call returned."""


class LifecycleRecorder:
    """Records ``(hook, subject, *details)`` tuples per subtask, before each real call.

    Operator hooks record the operator name, function hooks the operator holding the
    function, task phases the phase and state changes the new state, e.g.
    ``("operator_open", "map")``, ``("task", "run")``, ``("state", "RUNNING")``.
    Plain tuples of str and int, so recordings can travel back from Spark workers.
    """

    def __init__(self) -> None:
        self.by_task: dict[str, list[Call]] = defaultdict(list)
        self.hooks_seen: set[str] = set()

    def __getstate__(self) -> dict[str, object]:
        """A copy for the workers starts empty: each task reports only its own calls (an
        epoch's stages, and the copy in them, are built once per run)."""
        return {"by_task": defaultdict(list), "hooks_seen": set()}

    def calls(self, task: str | None = None, *, exclude: Iterable[str] = ()) -> list[Call]:
        """The calls of one subtask (the only one if ``task`` is None), minus ``exclude``."""
        if task is None:
            if len(self.by_task) != 1:
                known = list(self.by_task)
                raise ValueError(f"recorded {len(known)} subtasks; name one of {known}")
            task = next(iter(self.by_task))
        skip = set(exclude)
        return [c for c in self.by_task[task] if c[0] not in skip]

    def _record(self, hook: str, task: TaskInfo, *call: str | int) -> None:
        self.hooks_seen.add(f"flintlock_{hook}")
        self.by_task[task.key].append(call)

    # ---- task ----

    @hookimpl(wrapper=True)
    def flintlock_task_invoke_phase(self, task: TaskInfo, phase: str) -> Wrapped:
        self._record("task_invoke_phase", task, "task", phase)
        return (yield)

    @hookimpl
    def flintlock_task_state_changed(self, task: TaskInfo, current: ExecutionState) -> None:
        self._record("task_state_changed", task, "state", current.value)

    # ---- operators ----

    @hookimpl(wrapper=True)
    def flintlock_operator_setup(self, operator: StreamOperator, task: TaskInfo) -> Wrapped:
        self._record("operator_setup", task, "operator_setup", operator.name)
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_initialize_state(
        self, operator: StreamOperator, task: TaskInfo, restored: bool
    ) -> Wrapped:
        self._record("operator_initialize_state", task, "operator_initialize_state", operator.name)
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_open(self, operator: StreamOperator, task: TaskInfo) -> Wrapped:
        self._record("operator_open", task, "operator_open", operator.name)
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_process_batch(
        self, operator: StreamOperator, task: TaskInfo, input_index: int
    ) -> Wrapped:
        self._record("operator_process_batch", task, "operator_process_batch", operator.name)
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_process_watermark(
        self, operator: StreamOperator, task: TaskInfo, watermark: Watermark, input_index: int
    ) -> Wrapped:
        self._record(
            "operator_process_watermark",
            task,
            "operator_process_watermark",
            operator.name,
            watermark.timestamp,
        )
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_snapshot_state(
        self, operator: StreamOperator, task: TaskInfo, checkpoint_id: int
    ) -> Wrapped:
        self._record(
            "operator_snapshot_state", task, "operator_snapshot_state", operator.name, checkpoint_id
        )
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_notify_checkpoint_complete(
        self, operator: StreamOperator, task: TaskInfo, checkpoint_id: int
    ) -> Wrapped:
        self._record(
            "operator_notify_checkpoint_complete",
            task,
            "operator_notify_checkpoint_complete",
            operator.name,
            checkpoint_id,
        )
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_notify_checkpoint_aborted(
        self, operator: StreamOperator, task: TaskInfo, checkpoint_id: int
    ) -> Wrapped:
        self._record(
            "operator_notify_checkpoint_aborted",
            task,
            "operator_notify_checkpoint_aborted",
            operator.name,
            checkpoint_id,
        )
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_end_input(
        self, operator: StreamOperator, task: TaskInfo, input_index: int
    ) -> Wrapped:
        self._record("operator_end_input", task, "operator_end_input", operator.name, input_index)
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_finish(self, operator: StreamOperator, task: TaskInfo) -> Wrapped:
        self._record("operator_finish", task, "operator_finish", operator.name)
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_operator_close(self, operator: StreamOperator, task: TaskInfo) -> Wrapped:
        self._record("operator_close", task, "operator_close", operator.name)
        return (yield)

    # ---- user functions ----

    @hookimpl(wrapper=True)
    def flintlock_function_set_runtime_context(
        self, operator: StreamOperator, task: TaskInfo
    ) -> Wrapped:
        self._record(
            "function_set_runtime_context", task, "function_set_runtime_context", operator.name
        )
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_function_open(self, operator: StreamOperator, task: TaskInfo) -> Wrapped:
        self._record("function_open", task, "function_open", operator.name)
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_function_finish(self, operator: StreamOperator, task: TaskInfo) -> Wrapped:
        self._record("function_finish", task, "function_finish", operator.name)
        return (yield)

    @hookimpl(wrapper=True)
    def flintlock_function_close(self, operator: StreamOperator, task: TaskInfo) -> Wrapped:
        self._record("function_close", task, "function_close", operator.name)
        return (yield)

    # ---- travelling back from Spark workers ----

    @hookimpl
    def flintlock_report_to_driver(self, task: TaskInfo) -> list[list[str | int]]:
        """What this (worker-side) copy recorded for the subtask."""
        return [list(call) for call in self.by_task.get(task.key, [])]

    @hookimpl
    def flintlock_merge_report(self, task: str, report: list[list[str | int]]) -> None:
        """Add a worker's recording of subtask ``task`` (one epoch's calls, in order) to
        this (driver-side) recorder."""
        self.by_task[task].extend(tuple(call) for call in report)
        for call in report:
            self.hooks_seen.add(_HOOK_OF.get(str(call[0]), f"flintlock_{call[0]}"))


_HOOK_OF = {"task": "flintlock_task_invoke_phase", "state": "flintlock_task_state_changed"}
