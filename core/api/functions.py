"""User functions: rich lifecycle (set_runtime_context, open, finish, close) plus the work.

Each function works per record (``map(value)``, values as dicts) or per batch
(``map_batch(batch)``, the fast path); override one. Per-record outputs are turned into
a batch once per input batch, against ``output_schema`` or the first output's schema;
per-batch outputs are cast to ``output_schema`` when one is declared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pyarrow as pa

from flintlock.core.api.side_outputs import OutputTag, check_tag
from flintlock.core.runtime.timers import TimeDomain
from flintlock.core.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from flintlock.core.state.handles import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)

T = TypeVar("T")
K = TypeVar("K")
IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")

if TYPE_CHECKING:
    from flintlock.core.api.side_outputs import SideOutputCollector
    from flintlock.core.metrics.user import MetricGroup
    from flintlock.core.runtime.operator import OperatorContext, StreamOperator
    from flintlock.core.task_info import TaskInfo

Row = dict[str, Any]


class RuntimeContext:
    """What a user function may reach at run time: task identity and managed state."""

    def __init__(self, context: OperatorContext) -> None:
        self._context = context

    @property
    def task_info(self) -> TaskInfo:
        """The subtask this function runs in."""
        return self._context.task

    @property
    def operator_name(self) -> str:
        """The name of the operator holding this function."""
        return self._context.operator_name

    def metric_group(self) -> MetricGroup:
        """The operator's metrics in this subtask (Flink's ``getMetricGroup()``):
        ``counter``, ``gauge``, ``histogram``, ``meter``; read once per epoch."""
        return self._context.metrics

    def get_state(self, descriptor: ValueStateDescriptor[T]) -> ValueState[T]:
        """Keyed value state (the operator must be keyed)."""
        return self._context.keyed_state(descriptor)

    def get_list_state(self, descriptor: ListStateDescriptor[T]) -> ListState[T]:
        """Keyed list state (the operator must be keyed)."""
        return self._context.keyed_state(descriptor)

    def get_map_state(self, descriptor: MapStateDescriptor[K, T]) -> MapState[K, T]:
        """Keyed map state (the operator must be keyed)."""
        return self._context.keyed_state(descriptor)

    def get_reducing_state(self, descriptor: ReducingStateDescriptor[T]) -> ReducingState[T]:
        """Keyed reducing state (the operator must be keyed)."""
        return self._context.keyed_state(descriptor)

    def get_aggregating_state(
        self, descriptor: AggregatingStateDescriptor[IN, ACC, OUT]
    ) -> AggregatingState[IN, OUT]:
        """Keyed aggregating state (the operator must be keyed)."""
        return self._context.keyed_state(descriptor)

    def get_operator_list_state(self, descriptor: ListStateDescriptor[T]) -> ListState[T]:
        """Operator list state, split evenly over subtasks on rescale."""
        return self._context.operator_state.get_list_state(descriptor)

    def get_union_list_state(self, descriptor: ListStateDescriptor[T]) -> ListState[T]:
        """Operator list state that every subtask restores whole."""
        return self._context.operator_state.get_union_list_state(descriptor)


class Function:
    """Base of every user function, with Flink's rich lifecycle (all optional)."""

    output_schema: pa.Schema | None = None
    """Schema of the function's output (rows built to it, batches cast to it); if None,
    fixed by the first output. ``output_schema=`` on the DataStream method overrides it."""

    runtime_context: RuntimeContext

    def set_runtime_context(self, context: RuntimeContext) -> None:
        """Called once in the operator's setup, before open."""
        self.runtime_context = context

    def open(self) -> None:
        """Called once before the first record; acquire resources here."""

    def finish(self) -> None:
        """Called once after the last record (only when the input really ended): flush."""

    def close(self) -> None:
        """Called once at the end, on success, failure and cancel: release resources."""


def overrides(function: object, method: str, base: type) -> bool:
    """True if ``function``'s class overrides ``base.method``."""
    return getattr(type(function), method, None) is not getattr(base, method)


class MapFunction(Function):
    """One output row per input row."""

    def map(self, value: Row) -> Row:
        """Map one record (slow path)."""
        raise NotImplementedError(f"{type(self).__name__} overrides neither map nor map_batch")

    def map_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Map a whole batch (fast path); same number of rows out as in."""
        raise NotImplementedError


class FilterFunction(Function):
    """Keeps the rows for which the predicate holds."""

    def filter(self, value: Row) -> bool:
        """True to keep one record (slow path)."""
        raise NotImplementedError(
            f"{type(self).__name__} overrides neither filter nor filter_batch"
        )

    def filter_batch(self, batch: pa.RecordBatch) -> pa.Array:
        """A boolean mask over the batch (fast path)."""
        raise NotImplementedError


class FlatMapFunction(Function):
    """Zero or more output rows per input row."""

    def flat_map(self, value: Row) -> Iterable[Row]:
        """Rows for one record (slow path)."""
        raise NotImplementedError(
            f"{type(self).__name__} overrides neither flat_map nor flat_map_batch"
        )

    def flat_map_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        """A batch for a batch (fast path); None emits nothing."""
        raise NotImplementedError


Mapper = MapFunction | Callable[[Row], Row]
"""What ``DataStream.map`` takes: a MapFunction, or a callable from a row to a row."""
Predicate = FilterFunction | Callable[[Row], object]
"""What ``DataStream.filter`` takes: a FilterFunction, or a callable whose truth keeps a row."""
FlatMapper = FlatMapFunction | Callable[[Row], Iterable[Row]]
"""What ``DataStream.flat_map`` takes: a FlatMapFunction, or a callable to rows."""


class Collector:
    """Gathers per-record outputs; the operator emits them as one batch per input batch.

    ``collect(row)`` emits one row downstream; it is the list's own ``append`` (no Python
    frame per record), so the rows are taken with ``take()``, which starts a new list."""

    __slots__ = ("collect", "rows")

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.collect = self.rows.append

    def take(self) -> list[Row]:
        """The rows collected so far; collecting goes on into a new list."""
        rows = self.rows
        self.rows = []
        self.collect = self.rows.append
        return rows


class TimerService:
    """Timers of both time domains and the current times, as a process function sees them
    (Flink's TimerService); timers need a keyed stream and belong to the current key."""

    def __init__(self, operator: StreamOperator) -> None:
        self._operator = operator

    def current_watermark(self) -> int:
        """The operator's current event-time watermark."""
        return self._operator.current_watermark

    def current_processing_time(self) -> int:
        """The task's processing time in ms (the wall clock, or the harness's clock)."""
        processing_time = self._operator.context.processing_time
        assert processing_time is not None, "set by the chain in setup"
        return processing_time.clock()

    def register_event_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` for the current key when the watermark reaches ``timestamp``."""
        self._operator.timer_service().register_event_time_timer(timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        """Delete the current key's event-time timer at ``timestamp``."""
        self._operator.timer_service().delete_event_time_timer(timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` for the current key when processing time reaches ``timestamp``."""
        self._operator.timer_service().register_processing_time_timer(timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Delete the current key's processing-time timer at ``timestamp``."""
        self._operator.timer_service().delete_processing_time_timer(timestamp)


class ContextOperator(Protocol):
    """What a process function's context reads of the operator that calls it."""

    name: str
    _side: SideOutputCollector

    @property
    def user_timer_service(self) -> TimerService: ...


class ProcessContext:
    """The context of one ``process_element`` call."""

    __slots__ = ("_key", "_operator", "_timestamp")

    def __init__(self, operator: ContextOperator) -> None:
        self._operator = operator
        self._timestamp: int | None = None
        self._key: Any = None

    def timestamp(self) -> int | None:
        """The record's (or firing timer's) event timestamp, if it has one."""
        return self._timestamp

    def get_current_key(self) -> Any:
        """The current key (keyed functions only)."""
        return self._key

    def timer_service(self) -> TimerService:
        """Timers and the current times."""
        return self._operator.user_timer_service

    def output(self, tag: OutputTag, row: Row) -> None:
        """Emit ``row`` to side output ``tag`` (read with ``stream.get_side_output(tag)``)."""
        if type(tag) is not OutputTag:
            check_tag(tag, f"operator '{self._operator.name}': ctx.output")
        self._operator._side.add(tag, row)


class OnTimerContext(ProcessContext):
    """The context of one ``on_timer`` call (Flink's OnTimerContext): the timer's
    timestamp, its time domain and key."""

    __slots__ = ("_domain",)

    def __init__(self, operator: ContextOperator) -> None:
        super().__init__(operator)
        self._domain = TimeDomain.EVENT_TIME

    def time_domain(self) -> TimeDomain:
        """EVENT_TIME or PROCESSING_TIME: which clock fired this timer."""
        return self._domain


class ProcessFunction(Function):
    """Per record with context and collector; stateful and timer-driven when keyed."""

    def process_element(self, value: Row, ctx: ProcessContext, out: Collector) -> None:
        """Handle one record; emit with ``out.collect(row)``."""
        raise NotImplementedError(f"{type(self).__name__} must override process_element")

    def on_end_of_input(self, out: Collector) -> None:
        """The input ended (bounded input only): emit final results, e.g. an aggregate."""


class KeyedProcessFunction(ProcessFunction):
    """A process function on a keyed stream: keyed state and timers of both domains."""

    def on_timer(self, timestamp: int, ctx: OnTimerContext, out: Collector) -> None:
        """A timer of the current key fired at ``timestamp`` (``ctx.time_domain()`` says
        which clock); may emit, to ``out`` and to side outputs."""


class CoProcessFunction(Function):
    """Process two connected inputs; keyed state and timers when both are keyed."""

    def process_element1(self, value: Row, ctx: ProcessContext, out: Collector) -> None:
        """Handle one record of input 1."""
        raise NotImplementedError(f"{type(self).__name__} must override process_element1")

    def process_element2(self, value: Row, ctx: ProcessContext, out: Collector) -> None:
        """Handle one record of input 2."""
        raise NotImplementedError(f"{type(self).__name__} must override process_element2")

    def on_timer(self, timestamp: int, ctx: OnTimerContext, out: Collector) -> None:
        """A timer of the current key fired at ``timestamp`` (either time domain)."""


class SinkFunction(Function):
    """Writes records out of the job; ``finish()`` flushes the last of them (FLIP-147)."""

    def invoke(self, value: Row) -> None:
        """Write one record (slow path)."""
        raise NotImplementedError(f"{type(self).__name__} overrides neither invoke nor write_batch")

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Write a batch (fast path)."""
        raise NotImplementedError
