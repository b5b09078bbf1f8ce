"""Runs a task's invoke in a greenlet, so a caller can feed it one event at a time.

The task's code stays one plain top-to-bottom function; when it asks its input for the
next event, control returns to the caller (a test harness, or the Spark generator), which
hands in the next event or throws a cancel into it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import greenlet

from flintlock.core.errors import TaskCanceled
from flintlock.core.events import DataEvent, InputEvent
from flintlock.core.runtime.task import StreamTask

_NEED_INPUT = object()


class DrivenInput(Iterator[InputEvent]):
    """A task input whose events come from the driver, one per request."""

    def __init__(self) -> None:
        self.driver: TaskDriver | None = None
        self.rows = 0
        """Rows of the data events handed to the task, as a Spark task's reader counts."""

    def __next__(self) -> InputEvent:
        assert self.driver is not None, "DrivenInput used outside a TaskDriver"
        event: InputEvent = self.driver.parent.switch(_NEED_INPUT)
        if type(event) is DataEvent:
            self.rows += event.batch.num_rows
        return event

    def records(self) -> int:
        """The task's numRecordsIn so far."""
        return self.rows


class TaskDriver:
    """Starts a task and feeds it events; errors from the task surface in the feeding call."""

    def __init__(self, task: StreamTask, driven_input: DrivenInput) -> None:
        self.task = task
        driven_input.driver = self
        self.parent = greenlet.getcurrent()
        self._greenlet = greenlet.greenlet(self._main)
        self.done = False
        self.result: Any = None

    def _main(self) -> None:
        try:
            self.result = self.task.invoke()
        finally:
            self.done = True

    def start(self) -> None:
        """Run the task until it first waits for input (or to its end)."""
        self.parent = greenlet.getcurrent()
        self._greenlet.switch()

    def send(self, event: InputEvent) -> None:
        """Hand the waiting task its next event; returns when it waits again or ends."""
        if self.done:
            raise RuntimeError(
                f"task '{self.task.info.task_name}' already ended ({self.task.state.value}); "
                f"it takes no more input"
            )
        self.parent = greenlet.getcurrent()
        self._greenlet.switch(event)

    def cancel(self) -> None:
        """Throw a cancel into the waiting task; it closes and ends CANCELED."""
        if not self.done:
            self.parent = greenlet.getcurrent()
            self._greenlet.throw(TaskCanceled("canceled by the caller"))
