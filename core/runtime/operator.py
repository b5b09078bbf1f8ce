"""The operator API: Flink's StreamOperator lifecycle over Arrow record batches.

Lifecycle of one subtask (ARCHITECTURE.md section 3): setup, initialize_state, open,
[notify_checkpoint_complete/aborted after a restore], process_batch /
process_watermark ..., end_input(i), finish, snapshot_state, close.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import pyarrow as pa

from flintlock.core.events import MIN_TIMESTAMP, Watermark
from flintlock.core.metrics.user import MetricGroup
from flintlock.core.state.descriptors import HandleT, StateDescriptor

if TYPE_CHECKING:
    from flintlock.core.api.functions import Function, TimerService
    from flintlock.core.checkpoint.storage import CheckpointStorage
    from flintlock.core.hooks.runner import HookRunner
    from flintlock.core.runtime.mailbox import MailboxExecutor
    from flintlock.core.runtime.output import Output
    from flintlock.core.runtime.processing_time import ProcessingTimeService
    from flintlock.core.runtime.timers import InternalTimerService
    from flintlock.core.state.backend import KeyedStateBackend
    from flintlock.core.state.operator_state import OperatorStateStore
    from flintlock.core.task_info import TaskInfo


@dataclass
class OperatorContext:
    """What the runtime gives an operator in setup: identity, hooks and (later) state."""

    task: TaskInfo
    operator_name: str
    position: int
    chain_length: int
    hooks: HookRunner
    storage: CheckpointStorage | None = None
    keyed_backend: KeyedStateBackend | None = None
    operator_state: OperatorStateStore = field(default=None)  # type: ignore[assignment]
    timers: InternalTimerService | None = None
    processing_time: ProcessingTimeService | None = None
    """The task's clock and processing-time timer check (set by the chain in setup)."""
    mailbox: MailboxExecutor | None = None
    """The operator's door to the task's mailbox (set by the chain in setup)."""
    restored_types: dict[str, pa.DataType] = field(default_factory=dict)
    """Restored keyed states' stored value types, checked against their descriptors."""
    metrics: MetricGroup = field(default_factory=MetricGroup)
    """The operator's user metrics (``runtime_context.metric_group()``), read per epoch."""

    def keyed_state(self, descriptor: StateDescriptor[HandleT]) -> HandleT:
        """The keyed state handle of ``descriptor``; an error if the operator is not keyed,
        or if restored state cannot be read as the descriptor declares it."""
        if self.keyed_backend is None:
            raise RuntimeError(
                f"operator '{self.operator_name}' is not keyed: keyed state needs a key "
                f"(give the operator a key_column, or key_by before it)"
            )
        stored = self.restored_types.get(descriptor.name)
        if stored is not None:
            from flintlock.core.checkpoint.evolution import check_restored_type

            check_restored_type(
                self.operator_name, descriptor.name, descriptor.kind, stored, descriptor.arrow_type
            )
        return self.keyed_backend.get_state(descriptor)

    def describe_position(self) -> str:
        """E.g. ``'2nd of 3 in the chain'``."""
        return chain_position(self.position, self.chain_length)


def chain_position(position: int, chain_length: int) -> str:
    """Where an operator sits in its chain, for errors: ``'2nd of 3 in the chain'``."""
    n = position + 1
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(n if n < 20 else n % 10, "th")
    return f"{n}{suffix} of {chain_length} in the chain"


class StreamOperator:
    """Base of every operator. Override the lifecycle methods you need.

    ``key_column`` makes an operator keyed: the task gives it keyed state and an
    event-time timer service, scoped to the key of the record being processed.
    """

    key_column: str | None = None
    num_inputs = 1

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self.current_watermark = MIN_TIMESTAMP
        self._input_watermarks = [MIN_TIMESTAMP] * self.num_inputs
        self._input_idle = [False] * self.num_inputs
        self.context: OperatorContext
        self.output: Output

    @property
    def mailbox(self) -> MailboxExecutor:
        """Run actions on the task's thread between input events and before ``finish``
        (``self.mailbox.execute(action, "what it does")``, from any thread)."""
        mailbox = self.context.mailbox
        assert mailbox is not None, "the mailbox is there from setup on"
        return mailbox

    # ---- lifecycle ----

    def setup(self, context: OperatorContext, output: Output) -> None:
        """Receive the context and output. Called once, first to last; no state yet."""
        self.context = context
        self.output = output

    def initialize_state(self) -> None:
        """Declare or read state; keyed and operator state are restored already.

        Called once, first to last, after every operator's setup."""

    def open(self) -> None:
        """Prepare to process. Called once, last to first, so downstream is open."""

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        """Advance event time on one input; fires timers, then forwards the combined min."""
        marks = self._input_watermarks
        if watermark.timestamp <= marks[input_index - 1]:
            return
        marks[input_index - 1] = watermark.timestamp
        self._advance_event_time()

    def process_watermark_status(self, idle: bool, input_index: int = 1) -> None:
        """Input ``input_index`` became idle (it leaves the min over inputs) or active.

        Passes the status on when the operator's own output changes: idle once every
        input is idle, active again with the first active one. Not a hook."""
        was_idle = all(self._input_idle)
        self._input_idle[input_index - 1] = idle
        if idle:
            self._advance_event_time()
        if all(self._input_idle) != was_idle:
            self.output.emit_watermark_status(not was_idle)

    def _advance_event_time(self) -> None:
        """Event time = min over the active inputs' watermarks; fire timers, emit it."""
        marks = self._input_watermarks
        active = [m for m, idle in zip(marks, self._input_idle, strict=True) if not idle]
        combined = min(active) if active else max(marks)
        if combined <= self.current_watermark:
            return
        self.current_watermark = combined
        if self.context.timers is not None:
            self.context.timers.advance_watermark(combined)
            self.after_timers()
        self.output.emit_watermark(Watermark(combined))

    def after_timers(self) -> None:
        """Called after timers fired (for a watermark, or as processing time passed); emit
        what they produced."""

    def on_event_time(self, timestamp: int, key: Any) -> None:
        """An event-time timer of ``key`` fired (keyed operators); the key is current."""

    def on_processing_time(self, timestamp: int, key: Any) -> None:
        """A processing-time timer of ``key`` fired (keyed operators); the key is current.

        Called between batches once the task's clock reaches ``timestamp``; ``after_timers``
        follows the timers that fired together."""

    def snapshot_state(self, checkpoint_id: int) -> None:
        """Copy anything not yet in managed state into it. Must not emit.

        Called once per checkpoint, tail to head; the runtime writes managed state after."""

    def committables(self) -> list[Any] | None:
        """JSON committables prepared in snapshot_state for the driver's committer.

        2PC sink operators return them; they travel in the task's acknowledgement."""
        return None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed (after a restore, before any data)."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` never completed: drop what was prepared for it."""

    def end_input(self, input_index: int) -> None:
        """Input ``input_index`` has no more records; may emit."""

    def finish(self) -> None:
        """Flush buffered output; nothing may be emitted after this returns.

        Called once, after end_input, first to last. Commit in notify_checkpoint_complete."""

    def close(self) -> None:
        """Release resources. Called once on success, failure and cancel, first to last;
        must tolerate a failed or partial setup."""

    # ---- helpers for subclasses ----

    def set_current_key(self, key: Hashable) -> None:
        """Scope keyed state and timers to ``key``."""
        backend = self.context.keyed_backend
        if backend is None:
            raise RuntimeError(f"operator '{self.name}' is not keyed")
        backend.set_current_key(key)

    def timer_service(self) -> InternalTimerService:
        """The timer service, both time domains (keyed operators only)."""
        if self.context.timers is None:
            raise RuntimeError(f"operator '{self.name}' is not keyed: timers need a key")
        return self.context.timers

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class OneInputStreamOperator(StreamOperator):
    """An operator with one input: override ``process_batch``."""

    def process_batch(self, batch: pa.RecordBatch) -> None:
        """Handle one batch (the fast path); emit with ``self.output.emit(batch)``."""
        raise NotImplementedError(f"{type(self).__name__} must override process_batch")


class TwoInputStreamOperator(StreamOperator):
    """An operator with two inputs; its event time is the min over both."""

    num_inputs = 2

    def process_batch1(self, batch: pa.RecordBatch) -> None:
        """Handle one batch of input 1."""
        raise NotImplementedError(f"{type(self).__name__} must override process_batch1")

    def process_batch2(self, batch: pa.RecordBatch) -> None:
        """Handle one batch of input 2."""
        raise NotImplementedError(f"{type(self).__name__} must override process_batch2")


class MultipleInputStreamOperator(StreamOperator):
    """An operator with any number of inputs (Flink's MultipleInputStreamOperator): each
    input has its own watermark and ``end_input(i)``, event time is the min over them,
    ``finish`` comes once every input ended. Override ``process_input``."""

    def __init__(self, num_inputs: int, name: str | None = None) -> None:
        if not isinstance(num_inputs, int) or num_inputs < 1:
            raise ValueError(f"a multiple-input operator needs num_inputs >= 1, got {num_inputs!r}")
        self.num_inputs = num_inputs  # before the base sizes its per-input watermarks
        super().__init__(name)

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> None:
        """Handle one batch of input ``input_index`` (1-based)."""
        raise NotImplementedError(f"{type(self).__name__} must override process_input")


FunctionT = TypeVar("FunctionT", bound="Function")
"""The kind of user function an operator runs (``MapFunction`` for a map)."""


class UdfOperatorMixin(Generic[FunctionT]):
    """Runs a user function's lifecycle (set_runtime_context, open, finish, close) in the
    operator's own, each inside its ``flintlock_function_*`` hook; ``UdfOperatorMixin[F]``
    types ``self.function`` as ``F``."""

    function: FunctionT
    context: OperatorContext
    name: str

    def setup(self, context: OperatorContext, output: Output) -> None:
        from flintlock.core.api.functions import RuntimeContext

        super().setup(context, output)  # type: ignore[misc]
        runtime_context = RuntimeContext(context)
        self._call_function(
            "set_runtime_context", lambda: self.function.set_runtime_context(runtime_context)
        )

    def open(self) -> None:
        super().open()  # type: ignore[misc]
        self._call_function("open", self.function.open)

    def finish(self) -> None:
        super().finish()  # type: ignore[misc]
        self._call_function("finish", self.function.finish)

    def close(self) -> None:
        if getattr(self, "context", None) is not None:
            self._call_function("close", self.function.close)
        super().close()  # type: ignore[misc]

    def _call_function(self, method: str, step: Any) -> None:
        self.context.hooks.around(
            f"flintlock_function_{method}",
            step,
            function=self.function,
            operator=self,
            task=self.context.task,
        )

    @property
    def user_timer_service(self) -> TimerService:
        from flintlock.core.api.functions import TimerService

        return TimerService(cast("StreamOperator", self))  # mixed into a StreamOperator
