"""Partially finished jobs, fast (FLIP-147): an input's end_input is called once in a
job's life, across epochs and restores, and checkpoints record fully finished vertices."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from lifecycle_ops import Passthrough, Union2, batch

from flintlock.core.checkpoint_coordinator import fully_finished
from flintlock.core.snapshots import TaskRestore
from flintlock.testing import LifecycleRecorder, TwoInputHarness

MAX = 2**63 - 1


def test_an_input_ended_in_an_earlier_epoch_is_not_ended_again_after_restore(
    make_recorder: Callable[[], LifecycleRecorder],
) -> None:
    first, second = make_recorder(), make_recorder()
    harness = TwoInputHarness(Union2("co"), Passthrough("out"), plugins=[first])
    harness.process_batch(batch(1), input_index=2)
    harness.end_input(2)  # input 2's source finished in this epoch
    harness.process_batch(batch(2), input_index=1)
    snapshot = harness.checkpoint(1)  # a checkpoint without finish: input 1 goes on
    assert (snapshot.ended_inputs, snapshot.finished_at) == ([2], None)
    assert [c for c in first.calls() if c[0] in {"operator_end_input", "operator_finish"}] == [
        ("operator_end_input", "co", 2)
    ]

    restored = TwoInputHarness(
        Union2("co"), Passthrough("out"), plugins=[second], restore_from=snapshot
    )
    restored.end_input(2)  # the finished upstream forwards its end again, every epoch
    restored.process_batch(batch(3), input_index=1)
    restored.end_input(1)
    final = restored.complete(2)
    assert restored.output_rows() == [{"v": 3}]
    calls = second.calls(exclude={"state"})
    assert calls[calls.index(("task", "run")) : calls.index(("task", "snapshot"))] == [
        ("task", "run"),
        ("operator_process_watermark", "co", MAX),  # input 2's MAX_WATERMARK again
        ("operator_process_batch", "co"),
        ("operator_process_batch", "out"),
        ("operator_process_watermark", "co", MAX),
        ("operator_process_watermark", "out", MAX),
        ("operator_end_input", "co", 1),  # and no end_input(2): it ended in epoch 1
        ("task", "finish"),
        ("operator_finish", "co"),
        ("operator_end_input", "out", 1),
        ("operator_finish", "out"),
    ]
    assert (final.ended_inputs, final.finished_at, final.final) == ([1, 2], 2, True)


def test_ended_inputs_of_a_restore_are_those_every_old_subtask_ended() -> None:
    harness = TwoInputHarness(Union2("co"))
    harness.end_input(1)
    snapshot = harness.checkpoint(1)
    other = replace(snapshot, subtask_index=1, ended_inputs=[1, 2])
    assert TaskRestore(1, [snapshot, other]).ended_inputs() == {1}
    assert TaskRestore(1, []).ended_inputs() == set()
    # a finished subtask's snapshot (a final savepoint run anew) ends its inputs again
    finished = replace(other, finished_at=1)
    assert TaskRestore(1, [snapshot, finished]).ended_inputs() == set()


def test_a_vertex_is_fully_finished_once_all_its_subtasks_finished() -> None:
    def ack(task: str, subtask: int, finished: bool, at: int | None = None) -> dict:
        return {
            "task_name": task,
            "subtask_index": subtask,
            "finished": finished,
            "finished_at": at,
        }

    acknowledgements = [
        ack("short", 0, True, 2),
        ack("short", 1, True, 3),  # the vertex finished once its last subtask did
        ack("long", 0, True, 5),
        ack("long", 1, False),
        ack("old", 0, True),  # an acknowledgement from before finished_at: this one
    ]
    assert fully_finished(acknowledgements, 5) == {"old": 5, "short": 3}
    assert fully_finished([], 5) == {}
