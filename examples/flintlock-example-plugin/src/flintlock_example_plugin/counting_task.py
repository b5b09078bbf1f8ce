"""``counting-one-input``: the one-input task type, counting the batches it processes.

A task type is a ``StreamTask`` subclass; this one reuses flintlock's one-input task and
adds a task-specific step of its own in ``task_init`` (count what the input delivers)
and in ``task_cleanup`` (log the counts). Counts are per subtask and epoch: a task object
lives for one epoch, and a restored task starts again from zero.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from flintlock import OneInputStreamTask
from flintlock.plugin_api import DataEvent, InputEvent

logger = logging.getLogger("flintlock_example_plugin")


class CountingOneInputStreamTask(OneInputStreamTask):
    """A one-input task that counts the data batches and records its chain's head got.

    ``batches_processed`` and ``records_processed`` can be read while and after the task
    runs (in a harness: ``harness.task``); the totals are logged at task cleanup, on
    success, failure and cancel alike.
    """

    task_type = "counting-one-input"
    batches_processed: int = 0
    """Data batches the input delivered to the head of the chain so far."""
    records_processed: int = 0
    """Rows in those batches."""

    def task_init(self) -> None:
        """Open the input gate as the one-input task does, then count the input's batches."""
        super().task_init()
        self.environment.input = _CountingInput(self.environment.input, self)

    def task_cleanup(self) -> None:
        """Release what the one-input task holds, then log the counts."""
        super().task_cleanup()
        logger.info(
            "task %s processed %d records in %d batches",
            self.info.key,
            self.records_processed,
            self.batches_processed,
        )


class _CountingInput(Iterator[InputEvent]):
    """The task's input, unchanged, counting each data batch as the task takes it."""

    def __init__(self, events: Iterator[InputEvent], task: CountingOneInputStreamTask) -> None:
        self._events = events
        self._task = task

    def __next__(self) -> InputEvent:
        event = next(self._events)
        if isinstance(event, DataEvent):
            self._task.batches_processed += 1
            self._task.records_processed += event.batch.num_rows
        return event
