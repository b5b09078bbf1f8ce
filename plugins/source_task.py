"""The source task type: its head reads splits; MAX_WATERMARK when the input ends.

A source task has no input channels to carry a barrier, so its epoch's barrier comes
with the task: the job master decides where each epoch ends, and the task reads the
epoch's splits, then snapshots at that barrier. It is a plugin like any task type,
registered through the same entry point a third party's would use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flintlock import MAX_WATERMARK, ChannelError, SourceOperator, StreamTask, hookimpl
from flintlock.plugin_api import CheckpointBarrier


class SourceStreamTask(StreamTask):
    """Reads the source's splits of the epoch; MAX_WATERMARK when the input ends."""

    task_type = "source"
    head_operator_type = SourceOperator

    def run(self) -> None:
        """Emit this epoch's batches; if the input ends with them (a bounded source, the
        last epoch of an unbounded one), MAX_WATERMARK fires every event-time timer."""
        head = self.chain.head
        assert isinstance(head, SourceOperator)
        emit_next, fire_processing_timers = head.emit_next, self.processing_time.fire_due
        mails, run_mails = self.mailbox.mails, self.mailbox.run_pending
        while emit_next():
            fire_processing_timers()
            if mails:
                run_mails()
        if head.ends_input:
            self.chain.process_head_watermark(MAX_WATERMARK, 1)
            self.input_ended = True

    def task_cleanup(self) -> None:
        """Task-specific cleanup: close the source reader, after the operators closed."""
        chain = getattr(self, "chain", None)
        if chain is not None and isinstance(chain.head, SourceOperator):
            chain.head.close_reader()

    def await_barrier(self) -> CheckpointBarrier:
        """The epoch's barrier comes with the task (the job master decides it)."""
        barrier = self.environment.epoch_barrier
        if barrier is None:
            raise ChannelError("a source task needs the epoch's barrier in its environment")
        return barrier


@hookimpl
def flintlock_register_task_types(register: Callable[[str, Any], None]) -> None:
    register("source", SourceStreamTask)
