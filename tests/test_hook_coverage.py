"""Guard: every lifecycle method has a documented hook, and some test recorded it.

Runs last (tests/conftest.py orders it); run alone, it skips, since the recordings come
from the other lifecycle tests of the same session.
"""

from __future__ import annotations

import inspect
import typing

import pytest
from hook_tally import HOOKS_SEEN, PHASES_SEEN

from flintlock import Function, OneInputStreamOperator, StreamOperator, StreamTask
from flintlock.core.hooks import specs as hookspecs
from flintlock.core.hooks.specs import TaskPhase

OPERATOR_METHODS = [
    "setup",
    "initialize_state",
    "open",
    "process_batch",
    "process_watermark",
    "snapshot_state",
    "notify_checkpoint_complete",
    "notify_checkpoint_aborted",
    "end_input",
    "finish",
    "close",
]
FUNCTION_METHODS = ["set_runtime_context", "open", "finish", "close"]
TASK_HOOKS = ["flintlock_task_invoke_phase", "flintlock_task_state_changed"]

LIFECYCLE_HOOKS = (
    [f"flintlock_operator_{m}" for m in OPERATOR_METHODS]
    + [f"flintlock_function_{m}" for m in FUNCTION_METHODS]
    + TASK_HOOKS
)


def test_every_lifecycle_method_exists_where_the_hook_says() -> None:
    for method in OPERATOR_METHODS:
        assert callable(getattr(OneInputStreamOperator, method)), method
        assert method == "process_batch" or hasattr(StreamOperator, method), method
    for method in FUNCTION_METHODS:
        assert callable(getattr(Function, method)), method
    invoke_source = inspect.getsource(StreamTask)
    for phase in typing.get_args(TaskPhase):
        assert f'"{phase}"' in invoke_source, f"phase {phase} is not a step of StreamTask"


@pytest.mark.parametrize("hook", LIFECYCLE_HOOKS)
def test_every_lifecycle_method_has_a_documented_hookspec(hook: str) -> None:
    spec = getattr(hookspecs, hook, None)
    assert spec is not None, f"no hookspec {hook}"
    assert hasattr(spec, "flintlock_spec"), f"{hook} is not marked @hookspec"
    assert inspect.getdoc(spec), f"{hook} has no docstring"


def _recorded_anything() -> bool:
    return bool(HOOKS_SEEN)


@pytest.mark.parametrize("hook", LIFECYCLE_HOOKS)
def test_the_recording_plugin_saw_every_lifecycle_hook(hook: str) -> None:
    if not _recorded_anything():
        pytest.skip("run with the whole suite: recordings come from the lifecycle tests")
    assert hook in HOOKS_SEEN, f"no test recorded {hook}"


@pytest.mark.parametrize("phase", typing.get_args(TaskPhase))
def test_the_recording_plugin_saw_every_task_phase(phase: str) -> None:
    if not _recorded_anything():
        pytest.skip("run with the whole suite: recordings come from the lifecycle tests")
    assert phase in PHASES_SEEN, f"no test recorded task phase {phase}"
