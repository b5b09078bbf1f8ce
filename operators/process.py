"""process (ProcessFunction), keyed process (state and timers) and co-process operators.

A keyed operator's key is a column, a list of columns (a tuple key) or a key selector
(``flintlock.KeySelector``); ``timestamp_column`` (integer, or timestamp read as epoch
milliseconds) gives ``ctx.timestamp()``; ``output_schema`` fixes what ``out.collect`` emits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from flintlock import (
    CoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    OneInputStreamOperator,
    OnTimerContext,
    ProcessContext,
    ProcessFunction,
    TimeDomain,
    TwoInputStreamOperator,
    hookimpl,
)
from flintlock.plugin_api import (
    ColumnKey,
    ColumnsKey,
    FunctionKey,
    FusedRowsMixin,
    RowOutputMixin,
    RowStage,
    SideOutputCollector,
    UdfOperatorMixin,
    column_values,
    event_times,
    is_key_type,
    rows_of,
)

KeyLike = str | Sequence[str] | KeySelector | Callable[[dict[str, Any]], Any]
"""A key as operators take it: a column, columns (a tuple key), a KeySelector or a function."""


def as_key_selector(key: KeyLike) -> KeySelector:
    """The KeySelector for a column name, a list of column names or a function of the row."""
    if isinstance(key, KeySelector):
        return key
    if isinstance(key, str):
        if not key:
            raise ValueError("a key column name must not be empty")
        return ColumnKey(key)
    if callable(key):
        return FunctionKey(key)
    columns = list(key)
    if not columns or not all(isinstance(c, str) and c for c in columns):
        raise ValueError(f"a key is a column, a list of columns or a function, not {key!r}")
    return ColumnsKey(columns)


class _CollectingOperator(RowOutputMixin, UdfOperatorMixin[Any]):
    """Shared by the process operators: a collector flushed as one batch per step, side
    outputs (``ctx.output``) flushed with it, and timers of both domains into ``on_timer``."""

    name: str
    output: Any
    function: Any

    def _start_collecting(self, schema: pa.Schema | None) -> None:
        self._start_rows(self.name, schema)
        self._ctx = ProcessContext(self)
        self._timer_ctx = OnTimerContext(self)
        self._side = SideOutputCollector(self.name)
        self.output_schema = schema

    def _flush(self) -> None:
        super()._flush()
        if self._side.rows:
            self._side.flush(self.output)

    def on_event_time(self, timestamp: int, key: Any) -> None:
        self._on_timer(timestamp, key, TimeDomain.EVENT_TIME)

    def on_processing_time(self, timestamp: int, key: Any) -> None:
        self._on_timer(timestamp, key, TimeDomain.PROCESSING_TIME)

    def _on_timer(self, timestamp: int, key: Any, domain: TimeDomain) -> None:
        ctx = self._timer_ctx
        ctx._key, ctx._timestamp, ctx._domain = key, timestamp, domain
        on_timer = getattr(self.function, "on_timer", None)
        if on_timer is not None:
            on_timer(timestamp, ctx, self._collector)

    def end_input(self, input_index: int) -> None:
        on_end = getattr(self.function, "on_end_of_input", None)
        if on_end is not None:
            on_end(self._collector)
        self._flush()


def _schema(function: Any, declared: pa.Schema | None) -> pa.Schema | None:
    return declared if declared is not None else getattr(function, "output_schema", None)


class ProcessOperator(FusedRowsMixin, _CollectingOperator, OneInputStreamOperator):
    """Calls ``process_element(value, ctx, out)`` per record; keyed (state, timers) when
    ``key_column`` (a column or a list of them) or ``key_selector`` is given;
    ``timestamp_column`` gives ``ctx.timestamp()``."""

    def __init__(
        self,
        function: ProcessFunction,
        key_column: str | Sequence[str] | None = None,
        timestamp_column: str | None = None,
        name: str | None = None,
        key_selector: KeySelector | Callable[[dict[str, Any]], Any] | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        keyed = key_column is not None or key_selector is not None
        super().__init__(name or ("keyed_process" if keyed else "process"))
        self.function = function
        key = key_selector if key_selector is not None else key_column
        self.key_selector: KeySelector | None = as_key_selector(key) if key is not None else None
        self.key_column = key_column if isinstance(key_column, str) else None
        self.timestamp_column = timestamp_column
        self._start_collecting(_schema(function, output_schema))

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            self.emit_empty()
            return
        leading = []
        columns = None
        selector = self.key_selector
        index = _plain_key_index(batch, selector)
        if index is not None:
            # the key column's values are the keys: taken once, checked per distinct key
            columns = list(map(column_values, batch.columns))
            distinct = column_values(pc.unique(batch.column(index)))
            self.context.keyed_backend.check_keys(distinct)  # type: ignore[union-attr]
            leading.append(columns[index])
        elif selector is not None:
            keys = selector.keys(batch)
            self.context.keyed_backend.check_keys(keys)  # type: ignore[union-attr]
            leading.append(keys)
        if self.timestamp_column is not None:
            leading.append(event_times(batch, self.timestamp_column))
        self.fused_rows().run_batch(batch, *leading, columns=columns)

    def row_leading(self) -> tuple[str, ...]:
        """What a fused run takes per record besides the row: the key, the timestamp."""
        return ("key",) * (self.key_selector is not None) + ("stamp",) * (
            self.timestamp_column is not None
        )

    def accepts_rows(self, output_takes_rows: bool) -> bool:
        """Unkeyed, without a timestamp column, it takes rows from a per-record operator."""
        return self.key_selector is None and self.timestamp_column is None

    def emits_rows(self) -> bool:
        """Collected rows may go on as they are: without a declared schema always, with one
        per flush where they already have its types (``RowBatchBuilder.passes_as_rows``)."""
        return True

    def row_stage(self) -> RowStage:
        """This process as the last step of a fused run (unkeyed, no timestamp column)."""
        return RowStage("process", self.function.process_element, self)


def _plain_key_index(batch: pa.RecordBatch, selector: KeySelector | None) -> int | None:
    """The index of a column key's column when its values are plain ints, bools, strings
    or bytes (Arrow finds their distinct values); None otherwise."""
    if not isinstance(selector, ColumnKey):
        return None
    index = batch.schema.get_field_index(selector.column)  # -1: missing or not unique
    if index < 0:
        return None
    kind = batch.schema.field(index).type
    plain = is_key_type(kind) and not (pat.is_dictionary(kind) or pat.is_struct(kind))
    return index if plain else None


class KeyedProcessOperator(ProcessOperator):
    """A ProcessOperator that requires a key column (keyed state and event-time timers)."""

    def __init__(
        self,
        function: KeyedProcessFunction,
        key_column: str | Sequence[str] | None = None,
        timestamp_column: str | None = None,
        name: str | None = None,
        key_selector: KeySelector | Callable[[dict[str, Any]], Any] | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        if not key_column and key_selector is None:
            raise ValueError("a keyed process operator needs key_column or key_selector")
        super().__init__(
            function,
            key_column,
            timestamp_column,
            name or "keyed_process",
            key_selector=key_selector,
            output_schema=output_schema,
        )


class CoProcessOperator(_CollectingOperator, TwoInputStreamOperator):
    """Two inputs into a CoProcessFunction; keyed when ``key_columns`` gives one key per
    input (a column, a list of columns or a key selector each)."""

    def __init__(
        self,
        function: CoProcessFunction,
        key_columns: tuple[KeyLike, KeyLike] | None = None,
        timestamp_columns: tuple[str | None, str | None] = (None, None),
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__(name or "co_process")
        self.function = function
        self.key_columns = key_columns
        self.key_selectors = (
            (as_key_selector(key_columns[0]), as_key_selector(key_columns[1]))
            if key_columns
            else None
        )
        self.key_selector = self.key_selectors[0] if self.key_selectors else None
        first = key_columns[0] if key_columns else None
        self.key_column = first if isinstance(first, str) else None
        self.timestamp_columns = timestamp_columns
        self._start_collecting(_schema(function, output_schema))

    def process_batch1(self, batch: pa.RecordBatch) -> None:
        self._process(batch, 0, self.function.process_element1)

    def process_batch2(self, batch: pa.RecordBatch) -> None:
        self._process(batch, 1, self.function.process_element2)

    def _process(self, batch: pa.RecordBatch, side: int, process: Callable[..., None]) -> None:
        if not batch.num_rows:
            self.emit_empty()
            return
        rows = rows_of(batch)
        stamp_column = self.timestamp_columns[side]
        stamps = event_times(batch, stamp_column) if stamp_column else [None] * len(rows)
        ctx, out = self._ctx, self._collector
        if self.key_selectors is None:
            for row, stamp in zip(rows, stamps, strict=True):
                ctx._timestamp = stamp
                process(row, ctx, out)
        else:
            keys = self.key_selectors[side].keys(batch)
            set_key = self.context.keyed_backend.set_current_key  # type: ignore[union-attr]
            for row, key, stamp in zip(rows, keys, stamps, strict=True):
                set_key(key)
                ctx._key, ctx._timestamp = key, stamp
                process(row, ctx, out)
        self._flush()


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("process", ProcessOperator)
    register("keyed_process", KeyedProcessOperator)
    register("co_process", CoProcessOperator)
