"""Interrupted execution: what closes, in which order, and what the error names."""

from __future__ import annotations

import pytest
from lifecycle_ops import Boom, Passthrough, batch

from flintlock import ExecutionState, LifecycleError
from flintlock.testing import LifecycleRecorder, OneInputHarness

FAILED_CLEANUP = [
    ("task", "timer_shutdown"),
    ("task", "task_cleanup"),
    ("task", "close"),
]


def chain(recorder: LifecycleRecorder, fail: dict[str, str]) -> OneInputHarness:
    return OneInputHarness(
        *(Passthrough(name, fail.get(name)) for name in ("a", "b", "c")),
        plugins=[recorder],
        task_name="a -> b -> c",
        parallelism=4,
        subtask_index=2,
    )


def test_failure_in_processing_closes_every_operator_first_to_last(
    recorder: LifecycleRecorder,
) -> None:
    harness = chain(recorder, {"b": "process_batch"})
    with pytest.raises(LifecycleError) as caught:
        harness.process_batch(batch(1))
    error = caught.value
    assert isinstance(error.__cause__, Boom)
    assert (error.operator, error.operator_method, error.phase) == ("b", "process_batch", "run")
    assert error.subtask_index == 2 and error.task.task_name == "a -> b -> c"
    assert "operator 'b' failed in process_batch" in str(error)
    assert "subtask 2/4" in str(error) and "2nd of 3 in the chain" in str(error)
    assert harness.state is ExecutionState.FAILED
    calls = recorder.calls()
    run_on = calls[calls.index(("task", "run")) :]
    assert run_on == [
        ("task", "run"),
        ("operator_process_batch", "a"),
        ("operator_process_batch", "b"),
        *FAILED_CLEANUP,
        ("operator_close", "a"),
        ("operator_close", "b"),
        ("operator_close", "c"),
        ("task", "common_cleanup"),
        ("state", "FAILED"),
    ]
    assert not any(call[0] == "operator_finish" for call in calls)


def test_failure_in_setup_of_second_closes_first_and_second_only(
    recorder: LifecycleRecorder,
) -> None:
    harness = chain(recorder, {"b": "setup"})
    with pytest.raises(LifecycleError) as caught:
        harness.open()
    assert (caught.value.operator, caught.value.phase) == ("b", "setup")
    assert recorder.calls() == [
        ("state", "DEPLOYING"),
        ("task", "set_initial_state"),
        ("task", "load_chain"),
        ("state", "INITIALIZING"),
        ("task", "setup"),
        ("operator_setup", "a"),
        ("operator_setup", "b"),
        *FAILED_CLEANUP,
        ("operator_close", "a"),
        ("operator_close", "b"),  # its setup was called: it closes, tolerating the half setup
        ("task", "common_cleanup"),
        ("state", "FAILED"),
    ]


def test_failure_in_open_closes_every_operator(recorder: LifecycleRecorder) -> None:
    harness = chain(recorder, {"b": "open"})
    with pytest.raises(LifecycleError) as caught:
        harness.open()
    assert (caught.value.operator, caught.value.phase) == ("b", "open")
    calls = recorder.calls()
    assert calls[calls.index(("task", "open")) :] == [
        ("task", "open"),
        ("operator_open", "c"),
        ("operator_open", "b"),  # a is never opened: open goes last to first
        *FAILED_CLEANUP,
        ("operator_close", "a"),
        ("operator_close", "b"),
        ("operator_close", "c"),
        ("task", "common_cleanup"),
        ("state", "FAILED"),
    ]


def test_failure_in_one_close_the_others_still_close_and_first_error_wins(
    recorder: LifecycleRecorder,
) -> None:
    harness = OneInputHarness(
        Passthrough("a", "close"), Passthrough("b"), Passthrough("c", "close"), plugins=[recorder]
    )
    harness.process_batch(batch(1))
    with pytest.raises(LifecycleError) as caught:
        harness.complete()
    error = caught.value
    assert (error.operator, error.operator_method, error.phase) == ("a", "close", "close")
    assert str(error.__cause__) == "a failed in close"
    assert [(name, str(e)) for name, e in error.closing_errors] == [("c", "c failed in close")]
    assert "also while closing: 'c' raised Boom: c failed in close" in str(error)
    assert harness.state is ExecutionState.FAILED
    calls = recorder.calls()
    assert calls[calls.index(("task", "close")) :] == [
        ("task", "close"),
        ("operator_close", "a"),
        ("operator_close", "b"),
        ("operator_close", "c"),
        ("task", "timer_shutdown"),
        ("task", "task_cleanup"),
        ("task", "common_cleanup"),
        ("state", "FAILED"),
    ]
    assert harness.acknowledgement is not None  # the snapshot was taken before close


def test_failure_in_processing_and_in_close_keeps_the_processing_error(
    recorder: LifecycleRecorder,
) -> None:
    harness = chain(recorder, {"a": "close", "c": "process_batch"})
    with pytest.raises(LifecycleError) as caught:
        harness.process_batch(batch(1))
    error = caught.value
    assert (error.operator, error.operator_method) == ("c", "process_batch")
    assert [name for name, _ in error.closing_errors] == ["a"]


def test_cancel_closes_every_operator_and_ends_canceled(recorder: LifecycleRecorder) -> None:
    harness = chain(recorder, {})
    harness.process_batch(batch(1))
    error = harness.cancel()
    assert error.canceled and error.phase == "run"
    assert "task canceled in run" in str(error)
    assert harness.state is ExecutionState.CANCELED
    calls = recorder.calls()
    assert calls[calls.index(("task", "run")) :] == [
        ("task", "run"),
        ("operator_process_batch", "a"),
        ("operator_process_batch", "b"),
        ("operator_process_batch", "c"),
        *FAILED_CLEANUP,
        ("operator_close", "a"),
        ("operator_close", "b"),
        ("operator_close", "c"),
        ("task", "common_cleanup"),
        ("state", "CANCELED"),
    ]
    assert harness.output_rows() == [{"v": 1}]


def test_a_failed_task_takes_no_more_input() -> None:
    harness = OneInputHarness(Passthrough("a", "process_batch"))
    with pytest.raises(LifecycleError):
        harness.process_batch(batch(1))
    with pytest.raises(RuntimeError, match="already ended \\(FAILED\\)"):
        harness.process_batch(batch(2))
