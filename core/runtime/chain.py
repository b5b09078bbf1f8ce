"""An operator chain: the operators of one task, wired head to tail, and the loops that
take them through their lifecycle in the documented order.

Each loop names its order (open last to first, finish and close first to last, as Flink's
documented lifecycle says, snapshot tail to head), so ``StreamTask.invoke`` reads as a
list of steps; close goes on past a failing operator and returns every error, because
every operator that was set up must be closed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.checkpoint.snapshots import OperatorSnapshot, TaskRestore
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import ChainError, tag_operator
from flintlock.core.events import MAX_WATERMARK, Watermark
from flintlock.core.hooks.runner import HookRunner
from flintlock.core.runtime.mailbox import MailboxExecutor, TaskMailbox
from flintlock.core.runtime.operator import (
    MultipleInputStreamOperator,
    OperatorContext,
    StreamOperator,
    TwoInputStreamOperator,
)
from flintlock.core.runtime.output import (
    ChainingOutput,
    HeadInputOutput,
    Output,
    RecordWriter,
    TaskOutput,
)
from flintlock.core.runtime.processing_time import ProcessingTimeService
from flintlock.core.runtime.row_output import RowsOutput
from flintlock.core.state.backend import StateBackend
from flintlock.core.state.handler import initialize_operator_state, snapshot_operator_state
from flintlock.core.task_info import TaskInfo

if TYPE_CHECKING:
    from flintlock.core.runtime.timers import InternalTimerService


class OperatorChain:
    """The operators of one task, head first; each loop says its order in its name.

    ``sources`` (input index -> source operator) are sources chained into inputs of a
    multiple-input head (Flink's FLIP-182): upstream of the head, so they come first in
    every first-to-last loop and last in every last-to-first one."""

    def __init__(
        self,
        operators: Sequence[StreamOperator],
        writer: RecordWriter,
        hooks: HookRunner,
        task: TaskInfo,
        processing_time: ProcessingTimeService | None = None,
        mailbox: TaskMailbox | None = None,
        sources: Mapping[int, StreamOperator] | None = None,
    ) -> None:
        if not operators:
            raise ChainError(f"task '{task.task_name}' has no operators")
        self.sources = dict(sorted((sources or {}).items()))
        if self.sources and not isinstance(operators[0], MultipleInputStreamOperator):
            raise ChainError(
                f"task '{task.task_name}': sources chain only into a multiple-input head, "
                f"not into {type(operators[0]).__name__} '{operators[0].name}'"
            )
        names = [op.name for op in [*self.sources.values(), *operators]]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ChainError(
                f"operator names must be unique in a chain (they key the snapshot); "
                f"'{task.task_name}' has {duplicates} twice: pass name=... to tell them apart"
            )
        for op in operators[1:]:
            if not hasattr(op, "process_batch"):
                raise ChainError(
                    f"operator '{op.name}' ({type(op).__name__}) cannot be chained after "
                    f"another: only one-input operators follow the head"
                )
        self.operators = list(operators)
        self.hooks = hooks
        self.task = task
        self.outputs = self._wire_outputs(writer)
        self.all_operators = [*self.sources.values(), *self.operators]
        """Chained sources (by input), then head to tail: the operators' topological order."""
        self.all_outputs: list[Output] = [
            HeadInputOutput(
                index,
                self.process_head,
                self.process_head_watermark,
                self.process_head_watermark_status,
            )
            for index in self.sources
        ] + self.outputs
        for op, output in zip(self.all_operators, self.all_outputs, strict=True):
            output.bind_side_outputs(writer, op.name)
        self.processing_time = processing_time or ProcessingTimeService()
        self.mailbox = mailbox or TaskMailbox()
        self.setup_called: list[StreamOperator] = []
        self._head_process = self._bind_head_process()

    @property
    def head(self) -> StreamOperator:
        """The first operator: the one the task's input feeds."""
        return self.operators[0]

    def head_to_tail(self) -> list[StreamOperator]:
        """Operators in chain order."""
        return self.operators

    def tail_to_head(self) -> list[StreamOperator]:
        """Operators in reverse chain order."""
        return self.operators[::-1]

    # ---- lifecycle loops ----

    def setup_operators(self, storage: CheckpointStorage | None = None) -> None:
        """setup, first to last; an operator counts as set up once its setup was called."""
        length = len(self.all_operators)
        pairs = zip(self.all_operators, self.all_outputs, strict=True)
        for position, (op, output) in enumerate(pairs):
            context = OperatorContext(self.task, op.name, position, length, self.hooks, storage)
            context.processing_time = self.processing_time
            context.mailbox = MailboxExecutor(self.mailbox, op.name)
            self.setup_called.append(op)
            self._call(op, "setup", partial(op.setup, context, output))

    def initialize_states(
        self, backend: StateBackend, storage: CheckpointStorage, restore: TaskRestore | None
    ) -> None:
        """Create and restore each operator's state, then its initialize_state; first to last."""
        for op in self.all_operators:
            self._call(
                op,
                "initialize_state",
                partial(initialize_operator_state, op, backend, storage, restore),
                restored=restore is not None,
            )
            timers = op.context.timers
            if timers is not None:
                timers.bind_processing_time(
                    self.processing_time,
                    _tagged(op, "on_processing_time"),
                    op.after_timers,
                    op.name,
                )

    def open_operators(self) -> None:
        """open, LAST to first, so that each operator's downstream is open when it opens
        (chained sources last of all)."""
        for op in self.all_operators[::-1]:
            self._call(op, "open", op.open)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """notify_checkpoint_complete, tail to head (as Flink's chain does)."""
        for op in self.all_operators[::-1]:
            self._call(
                op,
                "notify_checkpoint_complete",
                partial(op.notify_checkpoint_complete, checkpoint_id),
                checkpoint_id=checkpoint_id,
            )

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """notify_checkpoint_aborted, tail to head."""
        for op in self.all_operators[::-1]:
            self._call(
                op,
                "notify_checkpoint_aborted",
                partial(op.notify_checkpoint_aborted, checkpoint_id),
                checkpoint_id=checkpoint_id,
            )

    def process_head(self, batch: pa.RecordBatch, input_index: int) -> None:
        """One input batch into the head (the hot path: one call per batch)."""
        try:
            self._head_process(batch, input_index)
        except BaseException as error:
            tag_operator(error, self.head.name, "process_batch")
            raise

    def process_head_watermark(self, watermark: Watermark, input_index: int) -> None:
        """A new combined watermark of one input into the head."""
        head = self.head
        self._call(
            head,
            "process_watermark",
            lambda: head.process_watermark(watermark, input_index),
            watermark=watermark,
            input_index=input_index,
        )

    def process_head_watermark_status(self, idle: bool, input_index: int) -> None:
        """Input ``input_index`` of the task became idle (or active again)."""
        head = self.head
        try:
            head.process_watermark_status(idle, input_index)
        except BaseException as error:
            tag_operator(error, head.name, "process_watermark_status")
            raise

    def end_head_input(self, input_index: int) -> None:
        """end_input(i) on the head, when input i of the task really ended."""
        head = self.head
        self._call(head, "end_input", lambda: head.end_input(input_index), input_index=input_index)

    def end_source_input(self, input_index: int) -> None:
        """A chained source read to its end: MAX_WATERMARK through it into the head's
        input ``input_index`` (every event-time timer fires), then end_input there."""
        source = self.sources[input_index]
        self._call(
            source,
            "process_watermark",
            lambda: source.process_watermark(MAX_WATERMARK, 1),
            watermark=MAX_WATERMARK,
            input_index=1,
        )
        self.end_head_input(input_index)

    def finish_operators(self) -> None:
        """finish, FIRST to last: each operator's due processing-time timers fire (their
        output flows on as usual), then, after the head, end_input(1), its due timers once
        more, the mails waiting (and those they put), and finish. Its processing time is
        quiesced and its mails refused right before finish: timers in the future and those
        registered in finish never fire, no mail of it runs after; nothing is emitted after it.
        Chained sources finish first, with no end_input (their input is their reader)."""
        head_at = len(self.sources)
        pairs = zip(self.all_operators, self.all_outputs, strict=True)
        for position, (op, output) in enumerate(pairs):
            timers = getattr(op.context, "timers", None)
            if position > head_at:
                self._fire_due_processing_timers(timers)
                self._call(op, "end_input", partial(op.end_input, 1), input_index=1)
            self._fire_due_processing_timers(timers)
            if timers is not None:
                timers.quiesce_processing_time()
            self.mailbox.run_pending()
            self.mailbox.refuse(op.name, "in or after its finish")
            self._call(op, "finish", op.finish)
            output.seal(op.name)

    def _fire_due_processing_timers(self, timers: InternalTimerService | None) -> None:
        """Fire one operator's processing-time timers at or below the task's clock now
        (Flink runs the timer mails already due before an operator's finish)."""
        if timers is not None:
            timers.advance_processing_time(self.processing_time.clock())

    def snapshot_states(
        self, checkpoint_id: int, storage: CheckpointStorage, directory: str
    ) -> dict[str, OperatorSnapshot]:
        """snapshot_state then write managed state, tail to head."""
        snapshots: dict[str, OperatorSnapshot] = {}

        def snapshot(op: StreamOperator) -> None:
            op.snapshot_state(checkpoint_id)
            snapshots[op.name] = snapshot_operator_state(op, storage, directory)

        for op in self.all_operators[::-1]:
            self._call(op, "snapshot_state", partial(snapshot, op), checkpoint_id=checkpoint_id)
        return {op.name: snapshots[op.name] for op in self.all_operators}

    def close_operators(self) -> list[tuple[str, BaseException]]:
        """close, FIRST to last, every operator whose setup was called, each once; goes on
        past a failing close and returns the errors in order."""
        errors: list[tuple[str, BaseException]] = []
        for op in self.setup_called:
            try:
                self._call(op, "close", op.close)
            except BaseException as error:  # keep closing the others
                errors.append((op.name, error))
        self.setup_called = []
        return errors

    def dispose_state(self) -> None:
        """Release state backends of operators that have one."""
        for op in self.all_operators:
            backend = getattr(getattr(op, "context", None), "keyed_backend", None)
            if backend is not None:
                backend.dispose()

    def quiesce_timers(self) -> None:
        """The timer service shutdown: timers stay in state, none fires any more."""
        for op in self.all_operators:
            timers = getattr(getattr(op, "context", None), "timers", None)
            if timers is not None:
                timers.quiesce()

    def position_of(self, name: str) -> str:
        """Describe an operator for errors: class and place in the chain."""
        for position, op in enumerate(self.all_operators):
            if op.name == name:
                n = len(self.all_operators)
                context = OperatorContext(self.task, name, position, n, self.hooks)
                return f"{type(op).__name__}, {context.describe_position()}"
        return "not in the chain"

    # ---- internals ----

    def _wire_outputs(self, writer: RecordWriter) -> list[Output]:
        """Each operator's output, tail to head: rows go on as they are (``RowsOutput``)
        where the next operator takes them and no plugin wraps ``process_batch``."""
        outputs: list[Output] = [TaskOutput(writer)]
        fuse = not self.hooks.implemented("flintlock_operator_process_batch")
        pairs = list(zip(self.operators[:-1], self.operators[1:], strict=True))
        for source, target in reversed(pairs):
            emits = getattr(source, "emits_rows", None)
            accepts = getattr(target, "accepts_rows", None)
            if fuse and emits and accepts and emits() and accepts(outputs[0].takes_rows):
                outputs.insert(0, RowsOutput(target, self.hooks, self.task))
            else:
                outputs.insert(0, ChainingOutput(target, self.hooks, self.task))
        return outputs

    def _call(self, op: StreamOperator, method: str, step: Callable[[], Any], **extra: Any) -> Any:
        try:
            return self.hooks.around(
                f"flintlock_operator_{method}", step, operator=op, task=self.task, **extra
            )
        except BaseException as error:
            tag_operator(error, op.name, method)
            raise

    def _bind_head_process(self) -> Callable[[pa.RecordBatch, int], None]:
        head = self.head
        if isinstance(head, TwoInputStreamOperator):
            by_input = {1: head.process_batch1, 2: head.process_batch2}

            def raw(batch: pa.RecordBatch, input_index: int) -> None:
                by_input[input_index](batch)
        elif isinstance(head, MultipleInputStreamOperator):
            process_input = head.process_input

            def raw(batch: pa.RecordBatch, input_index: int) -> None:
                process_input(input_index, batch)
        elif hasattr(head, "process_batch"):
            one = head.process_batch

            def raw(batch: pa.RecordBatch, input_index: int) -> None:
                one(batch)
        else:

            def raw(batch: pa.RecordBatch, input_index: int) -> None:
                raise ChainError(f"head operator '{head.name}' takes no input batches")

        if not self.hooks.implemented("flintlock_operator_process_batch"):
            return raw
        hooks, task = self.hooks, self.task

        def hooked(batch: pa.RecordBatch, input_index: int) -> None:
            hooks.around(
                "flintlock_operator_process_batch",
                lambda: raw(batch, input_index),
                operator=head,
                task=task,
                batch=batch,
                input_index=input_index,
            )

        return hooked


def _tagged(op: StreamOperator, method: str) -> Callable[[int, Any], None]:
    """``op.<method>(timestamp, key)``, its errors naming the operator and the method."""
    call = getattr(op, method)

    def tagged(timestamp: int, key: Any) -> None:
        try:
            call(timestamp, key)
        except BaseException as error:
            tag_operator(error, op.name, method)
            raise

    return tagged
