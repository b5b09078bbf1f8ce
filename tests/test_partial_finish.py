"""Partially finished jobs, fast (FLIP-147): an input's end_input is called once in a
job's life, across epochs and restores, and checkpoints record fully finished vertices."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pyarrow.fs as pafs
import pytest
from acknowledgements import acknowledgement
from lifecycle_ops import Passthrough, Union2, batch

from flintlock.core.checkpoint.finished_subtasks import (
    epoch_has_work,
    finished_subtasks,
    fully_finished,
    subtasks_finished,
)
from flintlock.core.checkpoint.reader import Checkpoint
from flintlock.core.checkpoint.restore import RestoreSource, plan_restores
from flintlock.core.checkpoint.snapshots import TaskRestore, TaskSnapshot
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.exchange.partitioners import FORWARD, REBALANCE, hash_by
from flintlock.core.plan.graph import InputEdge, JobGraph, Transformation, build_job_graph
from flintlock.core.sources.epochs import EpochSplits
from flintlock.core.sources.sequence import SequenceSource
from flintlock.core.sources.source import SourceEpoch, SourceOperator
from flintlock.errors import GraphError
from flintlock.testing import LifecycleRecorder, OneInputHarness, SourceHarness, TwoInputHarness

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


def test_ended_inputs_of_a_restore_are_its_own_or_after_a_rescale_those_all_ended() -> None:
    harness = TwoInputHarness(Union2("co"), parallelism=2)
    harness.end_input(1)
    mine = harness.checkpoint(1)  # subtask 0 of 2 ended input 1
    sibling = replace(mine, subtask_index=1, ended_inputs=[2])
    restore = TaskRestore(1, [mine, sibling])
    assert restore.ended_inputs(0, 2) == {1}  # unchanged parallelism: its own ends
    assert restore.ended_inputs(1, 2) == {2}
    assert restore.ended_inputs(0, 3) == set()  # rescaled: those every old subtask ended
    assert TaskRestore(1, [mine, replace(sibling, ended_inputs=[1, 2])]).ended_inputs(2, 3) == {1}
    assert TaskRestore(1, []).ended_inputs(0, 1) == set()
    # a finished sibling (a partially finished vertex) ended every input: it holds none back
    finished = replace(sibling, ended_inputs=[1, 2], finished_at=1)
    assert TaskRestore(1, [mine, finished]).ended_inputs(0, 3) == {1}
    # every old subtask finished (a final savepoint run anew): its inputs end again
    ended = TaskRestore(1, [replace(mine, finished_at=1), finished])
    assert (ended.ended_inputs(0, 2), ended.ended_inputs(0, 3)) == (set(), set())


def test_an_input_that_ended_in_one_subtask_only_ends_once_there(
    make_recorder: Callable[[], LifecycleRecorder],
) -> None:
    """A two-input vertex fed by forward edges: input 1's upstream subtask 0 finished
    alone in epoch 1, so only subtask 0 of this vertex saw input 1 end."""
    recorders = [make_recorder() for _ in range(2)]

    def subtask(index: int, restore: Any = None) -> TwoInputHarness:
        return TwoInputHarness(
            Union2("co"), parallelism=2, subtask_index=index, restore_from=restore
        )

    zero, one = subtask(0), subtask(1)
    zero.end_input(1)
    one.process_batch(batch(1), input_index=1)
    old = [zero.checkpoint(1), one.checkpoint(1)]
    assert [s.ended_inputs for s in old] == [[1], []]
    restored = TwoInputHarness(
        Union2("co"),
        parallelism=2,
        subtask_index=0,
        restore_from=TaskRestore(1, old),  # every old subtask's snapshot, as plan_restores
        plugins=[recorders[0]],
    )
    restored.end_input(1)  # the finished upstream subtask forwards its end again
    restored.process_batch(batch(2), input_index=2)
    restored.end_input(2)
    restored.complete(2)
    calls = recorders[0].calls(exclude={"state"})
    ends = [c for c in calls if c[0] in {"operator_end_input", "operator_finish"}]
    assert ends == [("operator_end_input", "co", 2), ("operator_finish", "co")]  # not 1 again


def test_a_vertex_is_fully_finished_once_all_its_subtasks_finished() -> None:
    def ack(task: str, subtask: int, finished: bool, at: int | None = None) -> Any:
        return acknowledgement(task, subtask, 5, finished=finished, finished_at=at)

    acknowledgements = [
        ack("short", 0, True, 2),
        ack("short", 1, True, 3),  # the vertex finished once its last subtask did
        ack("long", 0, True, 5),
        ack("long", 1, False),
        ack("old", 0, True),  # an acknowledgement from before finished_at: this one
    ]
    assert fully_finished(acknowledgements, 5) == {"old": 5, "short": 3}
    assert fully_finished([], 5) == {}


# ---- a source subtask finishes alone (FLIP-147 at subtask granularity) ----


def source_subtask(
    subtask: int, splits: list[Any], ends: bool, recorder: LifecycleRecorder
) -> SourceHarness:
    """Subtask ``subtask`` of 2 of an unbounded sequence source -> a chained operator, in
    epoch 1, which the job outlives (its barrier is not the final one)."""
    source = SourceOperator(SequenceSource(end=100, rows_per_epoch=10), name="src")
    return SourceHarness(
        source,
        Passthrough("tag"),
        plugins=[recorder],
        parallelism=2,
        subtask_index=subtask,
        source_epoch=SourceEpoch(splits, ends),
        final=False,
    )


def test_exhausted_subtasks_end_their_own_input_and_all_of_them_the_source() -> None:
    planned = EpochSplits([[[0, 5, 0]], [[5, 10, 0]]], {}, exhausted_subtasks=[True, False])
    assert not planned.exhausted
    assert planned.source_epochs() == [
        SourceEpoch([[0, 5, 0]], True),
        SourceEpoch([[5, 10, 0]], False),
    ]
    assert [e.ends_input for e in planned.source_epochs(ends=True)] == [True, True]  # a drain
    assert EpochSplits([[], []], {}, exhausted_subtasks=[True, True]).exhausted
    with pytest.raises(ValueError, match="2 flags for 3 assignments"):
        EpochSplits([[], [], []], {}, exhausted_subtasks=[True, False])


def test_a_source_subtask_whose_splits_are_exhausted_finishes_alone(
    make_recorder: Callable[[], LifecycleRecorder],
) -> None:
    planned = EpochSplits([[[0, 5, 0]], [[5, 10, 0]]], {}, exhausted_subtasks=[True, False])
    ending, going_on = make_recorder(), make_recorder()
    epochs = planned.source_epochs()
    first = source_subtask(0, epochs[0].splits, epochs[0].ends_input, ending)
    second = source_subtask(1, epochs[1].splits, epochs[1].ends_input, going_on)
    done, running = first.run(), second.run()
    assert [r["id"] for r in first.output_rows()] == [0, 1, 2, 3, 4]
    assert [r["id"] for r in second.output_rows()] == [5, 6, 7, 8, 9]

    def epoch_of(recorder: LifecycleRecorder) -> list[tuple[Any, ...]]:
        calls = recorder.calls(exclude={"state"})
        return calls[calls.index(("task", "run")) : calls.index(("task", "close"))]

    assert epoch_of(ending) == [
        ("task", "run"),
        ("operator_process_batch", "tag"),
        ("operator_process_watermark", "src", MAX),  # its input ended: MAX_WATERMARK
        ("operator_process_watermark", "tag", MAX),
        ("task", "finish"),
        ("operator_finish", "src"),
        ("operator_end_input", "tag", 1),
        ("operator_finish", "tag"),
        ("task", "snapshot"),
        ("operator_snapshot_state", "tag", 1),
        ("operator_snapshot_state", "src", 1),
    ]
    assert epoch_of(going_on) == [  # its sibling reads on: a checkpoint without finish
        ("task", "run"),
        ("operator_process_batch", "tag"),
        ("task", "snapshot"),
        ("operator_snapshot_state", "tag", 1),
        ("operator_snapshot_state", "src", 1),
    ]
    assert (first.writer.ended, second.writer.ended) == (True, False)
    assert (done.finished_at, done.final, running.finished_at) == (1, False, None)
    acks = [h.acknowledgement for h in (first, second)]
    assert [(a.finished, a.finished_at) for a in acks] == [(True, 1), (False, None)]  # type: ignore[union-attr]


def test_downstream_ends_its_input_once_every_upstream_subtask_finished(
    make_recorder: Callable[[], LifecycleRecorder],
) -> None:
    """Two upstream subtasks (channels 0 and 1): subtask 0 finishes in epoch 1 and its
    partition forwards its end in every later epoch; subtask 1 finishes in epoch 3."""
    recorders = [make_recorder() for _ in range(3)]

    def downstream(epoch: int, restore: Any) -> OneInputHarness:
        return OneInputHarness(
            Passthrough("down"),
            plugins=[recorders[epoch - 1]],
            input_channels={1: 2},
            restore_from=restore,
        )

    def run_phase(epoch: int) -> list[tuple[Any, ...]]:
        calls = recorders[epoch - 1].calls(exclude={"state"})
        return calls[calls.index(("task", "run")) : calls.index(("task", "snapshot"))]

    one = downstream(1, None)
    one.process_batch(batch(1), channel=0)
    one.end_input(channel=0)  # upstream subtask 0 finished: MAX_WATERMARK, end of input
    one.process_batch(batch(2), channel=1)
    one.process_watermark(5, channel=1)
    first = one.checkpoint(1)
    assert run_phase(1) == [
        ("task", "run"),
        ("operator_process_batch", "down"),
        ("operator_process_batch", "down"),
        ("operator_process_watermark", "down", 5),  # the finished channel holds nothing back
    ]
    assert (first.ended_inputs, first.finished_at) == ([], None)

    two = downstream(2, first)
    two.end_input(channel=0)  # forwarded again by the finished subtask's partition
    two.process_batch(batch(3), channel=1)
    second = two.checkpoint(2)
    assert run_phase(2) == [("task", "run"), ("operator_process_batch", "down")]
    assert (second.ended_inputs, second.finished_at) == ([], None)

    three = downstream(3, second)
    three.end_input(channel=0)
    three.process_batch(batch(4), channel=1)
    three.end_input(channel=1)  # the last upstream subtask finished
    final = three.complete(3)
    assert run_phase(3) == [
        ("task", "run"),
        ("operator_process_batch", "down"),
        ("operator_process_watermark", "down", MAX),
        ("operator_end_input", "down", 1),  # once, after the last upstream subtask ended
        ("task", "finish"),
        ("operator_finish", "down"),
    ]
    assert (final.ended_inputs, final.finished_at) == ([1], 3)
    rows = [r["v"] for h in (one, two, three) for r in h.output_rows()]
    assert rows == [1, 2, 3, 4]


# ---- which subtasks stay finished: checkpoints, restores, rescales, plans ----


def _vertex_graph(parallelism: int) -> JobGraph:
    """src -> relay (forward, not chained: src has a second consumer) -> sink (keyed);
    src -> other (rebalance)."""

    def t(tid: int, name: str, inputs: list[InputEdge]) -> Transformation:
        return Transformation(tid, name, lambda: None, parallelism, inputs, is_source=not inputs)  # type: ignore[arg-type,return-value]

    return build_job_graph(
        [
            t(0, "src", []),
            t(1, "relay", [InputEdge(0, 1, FORWARD)]),
            t(2, "other", [InputEdge(0, 1, REBALANCE)]),
            t(3, "sink", [InputEdge(1, 1, hash_by("k"))]),
        ]
    )


def _checkpoint(finished: dict[tuple[str, int], int], final: bool = False) -> Checkpoint:
    """A checkpoint 3 of the graph at parallelism 2 whose subtasks in ``finished`` finished."""
    snapshots = [
        TaskSnapshot(
            3, "checkpoint", final, name, i, 2, 128, "/x", {}, finished_at=finished.get((name, i))
        )
        for name in ("src", "relay", "other", "sink")
        for i in range(2)
    ]
    storage = CheckpointStorage(pafs.LocalFileSystem(), "/tmp")
    return Checkpoint("/x", storage, "job", "id", 3, "run", final, True, 128, snapshots, {})


def _finished(graph: JobGraph, checkpoint: Checkpoint) -> dict[str, dict[int, int]]:
    return finished_subtasks(graph, plan_restores(RestoreSource(checkpoint, {}, []), graph))


def test_finished_subtasks_stay_finished_at_equal_parallelism_and_run_again_rescaled() -> None:
    partial = _checkpoint({("src", 0): 1, ("relay", 0): 2})
    assert _finished(_vertex_graph(2), partial) == {"relay": {0: 2}, "src": {0: 1}}
    # rescaled: a partially finished vertex runs every new subtask again (as in Flink)
    assert _finished(_vertex_graph(3), partial) == {}
    # a finished subtask whose upstream subtask runs again would get data: it runs too
    assert _finished(_vertex_graph(2), _checkpoint({("relay", 0): 2})) == {}
    # a fully finished vertex stays finished at any parallelism; its forward consumer's
    # subtasks only where they finished themselves
    full = _checkpoint({("src", 0): 1, ("src", 1): 2, ("relay", 1): 2})
    assert _finished(_vertex_graph(3), full) == {"src": {0: 2, 1: 2, 2: 2}}
    assert _finished(_vertex_graph(2), full) == {"relay": {1: 2}, "src": {0: 2, 1: 2}}
    # a new run over a final checkpoint runs everything again
    everything = {(n, i): 3 for n in ("src", "relay", "other", "sink") for i in range(2)}
    assert _finished(_vertex_graph(2), _checkpoint(everything, final=True)) == {}


def test_checkpoint_metadata_records_every_finished_subtask() -> None:
    acknowledgements = [
        acknowledgement("src", 1, 4, finished=False, finished_at=None),
        acknowledgement("src", 0, 4, finished=True, finished_at=1),
        acknowledgement("sink", 0, 4, finished=True),  # from before finished_at
    ]
    assert subtasks_finished(acknowledgements, 4) == {"sink": {"0": 4}, "src": {"0": 1}}
    assert fully_finished(acknowledgements, 4) == {"sink": 4}


def test_an_epoch_plan_is_checked_against_the_finished_subtasks() -> None:
    graph = _vertex_graph(2)
    restores = plan_restores(RestoreSource(_checkpoint({("src", 0): 1}), {}, []), graph)
    uids = {name: name for name in ("src", "relay", "other", "sink")}

    def has_work(assignments: list[Any], flags: list[bool], restores: Any = restores) -> bool:
        planned = {"src": EpochSplits(assignments, {}, exhausted_subtasks=flags)}
        return epoch_has_work(graph, uids, planned, {"src": False}, {}, restores)

    assert has_work([[], [[0, 5, 0]]], [True, False])  # rows to read
    assert not has_work([[], []], [True, False])  # subtask 0 finished before: nothing new
    assert has_work([[], []], [True, True])  # subtask 1 ends now: an epoch of its own
    assert has_work([[], []], [True, False], restores={})  # a fresh run: subtask 0 ends now
    with pytest.raises(GraphError, match="subtask 0 finished in an earlier epoch, but is planned"):
        has_work([[[0, 5, 0]], []], [True, False])
    with pytest.raises(GraphError, match="no longer flagged exhausted"):
        has_work([[], []], [False, False])
