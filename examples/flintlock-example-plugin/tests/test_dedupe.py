"""The example plugin's own tests: dedupe and the counting task type, in the harness."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest
from flintlock_example_plugin import (
    COUNTING_TASK_TYPE,
    CountingOneInputStreamTask,
    DedupeOperator,
)

from flintlock import LifecycleError
from flintlock.testing import OneInputHarness


def rows(*pairs: tuple[object, int]) -> list[dict[str, object]]:
    return [{"k": k, "v": v} for k, v in pairs]


def test_keeps_the_first_row_of_each_key_within_and_across_batches() -> None:
    harness = OneInputHarness(DedupeOperator("k"))
    harness.process_records(rows(("a", 1), ("b", 2), ("a", 3)))
    harness.process_records(rows(("b", 4), ("c", 5), ("c", 6)))
    assert harness.output_rows() == rows(("a", 1), ("b", 2), ("c", 5))
    assert [b.num_rows for b in harness.writer.batches] == [2, 1]


def test_a_batch_of_only_seen_keys_emits_nothing() -> None:
    harness = OneInputHarness(DedupeOperator("k"))
    harness.process_records(rows((1, 1), (2, 2)))
    harness.process_records(rows((2, 3), (1, 4), (2, 5)))
    assert len(harness.writer.batches) == 1
    assert harness.output_rows() == rows((1, 1), (2, 2))


def test_null_keys_are_always_kept() -> None:
    harness = OneInputHarness(DedupeOperator("k"))
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    harness.process_records(rows((None, 1), ("a", 2), (None, 3), ("a", 4)), schema=schema)
    assert harness.output_rows() == rows((None, 1), ("a", 2), (None, 3))


def test_seen_keys_survive_checkpoint_and_restore() -> None:
    first = OneInputHarness(DedupeOperator("k"))
    first.process_records(rows(("a", 1), ("b", 2)))
    snapshot = first.checkpoint(1)
    dedupe_state = snapshot.operator("dedupe")
    assert dedupe_state is not None
    assert [f.name for f in dedupe_state.keyed] == ["seen"]

    restored = OneInputHarness(DedupeOperator("k"), restore_from=snapshot)
    restored.process_records(rows(("a", 3), ("c", 4), ("b", 5), ("c", 6)))
    restored.complete(2)
    assert restored.output_rows() == rows(("c", 4))


def test_an_unkeyable_key_fails_the_task_in_process_batch() -> None:
    harness = OneInputHarness(DedupeOperator("k"))
    with pytest.raises(LifecycleError) as caught:
        harness.process_records([{"k": 1.5}])
    assert caught.value.operator == "dedupe"
    assert isinstance(caught.value.__cause__, TypeError)


def test_a_missing_key_column_is_refused() -> None:
    with pytest.raises(ValueError, match="key column"):
        DedupeOperator("")


def test_the_counting_task_counts_batches_and_records_and_logs_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = OneInputHarness(DedupeOperator("k"), task_type=COUNTING_TASK_TYPE)
    assert isinstance(harness.task, CountingOneInputStreamTask)
    harness.process_records(rows(("a", 1), ("a", 2)))
    harness.process_watermark(5)
    harness.process_records(rows(("b", 3)))
    assert (harness.task.batches_processed, harness.task.records_processed) == (2, 3)
    with caplog.at_level(logging.INFO, logger="flintlock_example_plugin"):
        harness.complete()
    assert harness.output_rows() == rows(("a", 1), ("b", 3))
    assert "task dedupe#0 processed 3 records in 2 batches" in caplog.messages
