"""Source and two-input task types: their part of the sequence, exactly."""

from __future__ import annotations

from lifecycle_ops import Passthrough, Union2, batch

from flintlock import CollectionSource, ExecutionState, SourceOperator, WatermarkStrategy
from flintlock.testing import LifecycleRecorder, SourceHarness, TwoInputHarness

MAX = 2**63 - 1


def test_source_task_reads_to_the_end_then_max_watermark_finish_final_checkpoint(
    recorder: LifecycleRecorder,
) -> None:
    source = SourceOperator(
        CollectionSource([{"v": 1, "t": 5}, {"v": 2, "t": 9}], batch_size=1),
        WatermarkStrategy("t", max_out_of_orderness=2),
        name="src",
    )
    harness = SourceHarness(source, Passthrough("sink"), plugins=[recorder], checkpoint_id=7)
    snapshot = harness.run()
    assert harness.output_rows() == [{"v": 1, "t": 5}, {"v": 2, "t": 9}]
    assert harness.watermarks == [2, 6, MAX]
    assert snapshot.final and snapshot.checkpoint_id == 7
    assert harness.writer.ended
    assert harness.state is ExecutionState.FINISHED
    calls = recorder.calls(exclude={"state"})
    assert calls == [
        ("task", "set_initial_state"),
        ("task", "load_chain"),
        ("task", "setup"),
        ("operator_setup", "src"),
        ("operator_setup", "sink"),
        ("task", "task_init"),
        ("task", "initialize_state"),
        ("operator_initialize_state", "src"),
        ("operator_initialize_state", "sink"),
        ("task", "open"),
        ("operator_open", "sink"),
        ("operator_open", "src"),
        ("task", "notify_restored"),
        ("task", "run"),
        ("operator_process_batch", "sink"),
        ("operator_process_watermark", "sink", 2),
        ("operator_process_batch", "sink"),
        ("operator_process_watermark", "sink", 6),
        ("operator_process_watermark", "src", MAX),
        ("operator_process_watermark", "sink", MAX),
        ("task", "finish"),
        ("operator_finish", "src"),  # a source has no input to end
        ("operator_end_input", "sink", 1),
        ("operator_finish", "sink"),
        ("task", "snapshot"),
        ("operator_snapshot_state", "sink", 7),
        ("operator_snapshot_state", "src", 7),
        ("task", "close"),
        ("operator_close", "src"),
        ("operator_close", "sink"),
        ("task", "timer_shutdown"),
        ("task", "task_cleanup"),
        ("task", "common_cleanup"),
    ]


def test_source_positions_are_restored_from_operator_state() -> None:
    rows = [{"v": i} for i in range(4)]
    first = SourceHarness(CollectionSource(rows, batch_size=1))
    snapshot = first.run()
    again = SourceHarness(CollectionSource(rows, batch_size=1), restore_from=snapshot)
    again.run()
    assert first.output_rows() == rows
    assert again.output_rows() == []  # every split was read to its end before


def test_two_input_task_ends_inputs_in_the_order_they_end_then_finishes(
    recorder: LifecycleRecorder,
) -> None:
    harness = TwoInputHarness(Union2("co"), Passthrough("out"), plugins=[recorder])
    harness.process_batch(batch(1), input_index=2)
    harness.process_watermark(4, input_index=1)
    harness.process_watermark(3, input_index=2)
    harness.end_input(2)
    harness.process_batch(batch(2), input_index=1)
    harness.end_input(1)
    harness.complete(checkpoint_id=1)
    assert harness.output_rows() == [{"v": 1}, {"v": 2}]
    assert harness.watermarks == [3, 4, MAX]  # the min over both inputs
    calls = recorder.calls(exclude={"state"})
    assert calls[calls.index(("task", "run")) :] == [
        ("task", "run"),
        ("operator_process_batch", "co"),
        ("operator_process_batch", "out"),
        ("operator_process_watermark", "co", 4),
        ("operator_process_watermark", "co", 3),
        ("operator_process_watermark", "out", 3),
        ("operator_process_watermark", "co", MAX),
        ("operator_process_watermark", "out", 4),
        ("operator_end_input", "co", 2),
        ("operator_process_batch", "co"),
        ("operator_process_batch", "out"),
        ("operator_process_watermark", "co", MAX),
        ("operator_process_watermark", "out", MAX),
        ("operator_end_input", "co", 1),
        ("task", "finish"),  # only after both inputs ended
        ("operator_finish", "co"),
        ("operator_end_input", "out", 1),
        ("operator_finish", "out"),
        ("task", "snapshot"),
        ("operator_snapshot_state", "out", 1),
        ("operator_snapshot_state", "co", 1),
        ("task", "close"),
        ("operator_close", "co"),
        ("operator_close", "out"),
        ("task", "timer_shutdown"),
        ("task", "task_cleanup"),
        ("task", "common_cleanup"),
    ]
