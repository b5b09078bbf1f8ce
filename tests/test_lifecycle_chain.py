"""The exact call sequence of a task and its operators, recorded through a plugin."""

from __future__ import annotations

from collections.abc import Callable

from lifecycle_ops import Passthrough, batch

from flintlock import ExecutionState, MapFunction
from flintlock.operators.basic import FilterOperator, MapOperator
from flintlock.testing import LifecycleRecorder, OneInputHarness

START = [
    ("state", "DEPLOYING"),
    ("task", "set_initial_state"),
    ("task", "load_chain"),
    ("state", "INITIALIZING"),
    ("task", "setup"),
]
CLEANUP = [
    ("task", "timer_shutdown"),
    ("task", "task_cleanup"),
    ("task", "common_cleanup"),
]


class Double(MapFunction):
    """A per-batch map function with the full rich lifecycle."""

    def map_batch(self, b):  # type: ignore[no-untyped-def]
        import pyarrow.compute as pc

        return b.set_column(0, "v", pc.multiply(b.column(0), 2))


def test_three_operator_chain_run_to_completion(recorder: LifecycleRecorder) -> None:
    harness = OneInputHarness(
        MapOperator(Double(), name="double"),
        FilterOperator(lambda row: row["v"] > 2, name="big"),
        Passthrough("out"),
        plugins=[recorder],
    )
    harness.process_batch(batch(1, 2, 3))
    harness.process_watermark(10)
    snapshot = harness.complete(checkpoint_id=1)

    assert harness.output_rows() == [{"v": 4}, {"v": 6}]
    assert harness.state is ExecutionState.FINISHED
    assert snapshot.final and snapshot.checkpoint_id == 1
    assert harness.watermarks == [10, 2**63 - 1]
    assert recorder.calls() == [
        *START,
        ("operator_setup", "double"),
        ("function_set_runtime_context", "double"),
        ("operator_setup", "big"),
        ("function_set_runtime_context", "big"),
        ("operator_setup", "out"),
        ("task", "task_init"),
        ("task", "initialize_state"),
        ("operator_initialize_state", "double"),
        ("operator_initialize_state", "big"),
        ("operator_initialize_state", "out"),
        ("task", "open"),
        ("operator_open", "out"),
        ("operator_open", "big"),
        ("function_open", "big"),
        ("operator_open", "double"),
        ("function_open", "double"),
        ("state", "RUNNING"),
        ("task", "notify_restored"),
        ("task", "run"),
        ("operator_process_batch", "double"),
        ("operator_process_batch", "big"),
        ("operator_process_batch", "out"),
        ("operator_process_watermark", "double", 10),
        ("operator_process_watermark", "big", 10),
        ("operator_process_watermark", "out", 10),
        ("operator_process_watermark", "double", 2**63 - 1),
        ("operator_process_watermark", "big", 2**63 - 1),
        ("operator_process_watermark", "out", 2**63 - 1),
        ("operator_end_input", "double", 1),
        ("task", "finish"),
        ("operator_finish", "double"),
        ("function_finish", "double"),
        ("operator_end_input", "big", 1),
        ("operator_finish", "big"),
        ("function_finish", "big"),
        ("operator_end_input", "out", 1),
        ("operator_finish", "out"),
        ("task", "snapshot"),
        ("operator_snapshot_state", "out", 1),
        ("operator_snapshot_state", "big", 1),
        ("operator_snapshot_state", "double", 1),
        ("task", "close"),
        ("operator_close", "double"),
        ("function_close", "double"),
        ("operator_close", "big"),
        ("function_close", "big"),
        ("operator_close", "out"),
        *CLEANUP,
        ("state", "FINISHED"),
    ]


def test_checkpoint_then_restore_with_an_aborted_checkpoint(
    recorder: LifecycleRecorder, make_recorder: Callable[[], LifecycleRecorder]
) -> None:
    first = OneInputHarness(Passthrough("a"), Passthrough("b"), plugins=[recorder])
    first.process_batch(batch(1))
    snapshot = first.checkpoint(1)
    assert first.state is ExecutionState.FINISHED
    assert not snapshot.final
    assert first.writer.ended is False  # an epoch end is not an end of input

    epoch_one = recorder.calls()
    assert ("operator_finish", "a") not in epoch_one

    second_recorder = make_recorder()
    second = OneInputHarness(
        Passthrough("a"),
        Passthrough("b"),
        restore_from=snapshot,
        aborted_checkpoints=[2],
        plugins=[second_recorder],
    )
    second.process_batch(batch(2))
    second.complete(checkpoint_id=3)
    assert second.output_rows() == [{"v": 2}]
    assert second_recorder.calls(exclude={"state"}) == [
        ("task", "set_initial_state"),
        ("task", "load_chain"),
        ("task", "setup"),
        ("operator_setup", "a"),
        ("operator_setup", "b"),
        ("task", "task_init"),
        ("task", "initialize_state"),
        ("operator_initialize_state", "a"),
        ("operator_initialize_state", "b"),
        ("task", "open"),
        ("operator_open", "b"),
        ("operator_open", "a"),
        ("task", "notify_restored"),  # right after open, before any data
        ("operator_notify_checkpoint_complete", "b", 1),
        ("operator_notify_checkpoint_complete", "a", 1),
        ("operator_notify_checkpoint_aborted", "b", 2),
        ("operator_notify_checkpoint_aborted", "a", 2),
        ("task", "run"),
        ("operator_process_batch", "a"),
        ("operator_process_batch", "b"),
        ("operator_process_watermark", "a", 2**63 - 1),
        ("operator_process_watermark", "b", 2**63 - 1),
        ("operator_end_input", "a", 1),
        ("task", "finish"),
        ("operator_finish", "a"),
        ("operator_end_input", "b", 1),
        ("operator_finish", "b"),
        ("task", "snapshot"),
        ("operator_snapshot_state", "b", 3),
        ("operator_snapshot_state", "a", 3),
        ("task", "close"),
        ("operator_close", "a"),
        ("operator_close", "b"),
        *CLEANUP,
    ]
    assert recorder.calls(exclude={"state"}) == [
        ("task", "set_initial_state"),
        ("task", "load_chain"),
        ("task", "setup"),
        ("operator_setup", "a"),
        ("operator_setup", "b"),
        ("task", "task_init"),
        ("task", "initialize_state"),
        ("operator_initialize_state", "a"),
        ("operator_initialize_state", "b"),
        ("task", "open"),
        ("operator_open", "b"),
        ("operator_open", "a"),
        ("task", "notify_restored"),
        ("task", "run"),
        ("operator_process_batch", "a"),
        ("operator_process_batch", "b"),
        ("task", "snapshot"),
        ("operator_snapshot_state", "b", 1),
        ("operator_snapshot_state", "a", 1),
        ("task", "close"),
        ("operator_close", "a"),
        ("operator_close", "b"),
        *CLEANUP,
    ]


def test_recorder_handed_to_one_harness_sees_nothing_of_another() -> None:
    mine = LifecycleRecorder()
    OneInputHarness(Passthrough("a"), plugins=[mine]).complete()
    OneInputHarness(Passthrough("other")).complete()
    assert {call[1] for call in mine.calls() if call[0] == "operator_open"} == {"a"}
