"""process (ProcessFunction), keyed process (state and timers) and co-process operators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flintlock.core.functions import (
    Collector,
    CoProcessFunction,
    KeyedProcessFunction,
    ProcessContext,
    ProcessFunction,
)
from flintlock.core.operator import (
    OneInputStreamOperator,
    TwoInputStreamOperator,
    UdfOperatorMixin,
)
from flintlock.core.plugin_manager import hookimpl
from flintlock.core.records import RowBatchBuilder, rows_of


class _CollectingOperator(UdfOperatorMixin):
    """Shared by the process operators: a collector flushed as one batch per step."""

    name: str
    output: Any

    def _start_collecting(self, schema: pa.Schema | None) -> None:
        self._collector = Collector()
        self._ctx = ProcessContext(self)
        self._builder = RowBatchBuilder(self.name, schema)

    def _flush(self) -> None:
        rows = self._collector.rows
        if rows:
            self._collector.rows = []
            batch = self._builder.build(rows)
            if batch is not None:
                self.output.emit(batch)

    def after_timers(self) -> None:
        self._flush()

    def end_input(self, input_index: int) -> None:
        on_end = getattr(self.function, "on_end_of_input", None)
        if on_end is not None:
            on_end(self._collector)
        self._flush()

    def finish(self) -> None:
        super().finish()
        self._flush()  # what the function's finish() collected


class ProcessOperator(_CollectingOperator, OneInputStreamOperator):
    """Calls ``process_element(value, ctx, out)`` per record; keyed (state, timers) when
    ``key_column`` is given; ``timestamp_column`` gives ``ctx.timestamp()``."""

    def __init__(
        self,
        function: ProcessFunction,
        key_column: str | None = None,
        timestamp_column: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name or ("keyed_process" if key_column else "process"))
        self.function = function
        self.key_column = key_column
        self.timestamp_column = timestamp_column
        self._start_collecting(function.output_schema)

    def process_batch(self, batch: pa.RecordBatch) -> None:
        rows = rows_of(batch)
        stamps = (
            batch.column(self.timestamp_column).to_pylist()
            if self.timestamp_column
            else [None] * len(rows)
        )
        process, ctx, out = self.function.process_element, self._ctx, self._collector
        if self.key_column is None:
            for row, stamp in zip(rows, stamps, strict=True):
                ctx._timestamp = stamp
                process(row, ctx, out)
        else:
            keys = batch.column(self.key_column).to_pylist()
            set_key = self.context.keyed_backend.set_current_key  # type: ignore[union-attr]
            for row, key, stamp in zip(rows, keys, stamps, strict=True):
                set_key(key)
                ctx._key, ctx._timestamp = key, stamp
                process(row, ctx, out)
        self._flush()

    def on_event_time(self, timestamp: int, key: Any) -> None:
        self._ctx._key, self._ctx._timestamp = key, timestamp
        on_timer = getattr(self.function, "on_timer", None)
        if on_timer is not None:
            on_timer(timestamp, self._ctx, self._collector)


class KeyedProcessOperator(ProcessOperator):
    """A ProcessOperator that requires a key column (keyed state and event-time timers)."""

    def __init__(
        self,
        function: KeyedProcessFunction,
        key_column: str,
        timestamp_column: str | None = None,
        name: str | None = None,
    ) -> None:
        if not key_column:
            raise ValueError("a keyed process operator needs key_column")
        super().__init__(function, key_column, timestamp_column, name or "keyed_process")


class CoProcessOperator(_CollectingOperator, TwoInputStreamOperator):
    """Two inputs into a CoProcessFunction; keyed when ``key_columns`` (one per input)."""

    def __init__(
        self,
        function: CoProcessFunction,
        key_columns: tuple[str, str] | None = None,
        timestamp_columns: tuple[str | None, str | None] = (None, None),
        name: str | None = None,
    ) -> None:
        super().__init__(name or "co_process")
        self.function = function
        self.key_columns = key_columns
        self.key_column = key_columns[0] if key_columns else None
        self.timestamp_columns = timestamp_columns
        self._start_collecting(function.output_schema)

    def process_batch1(self, batch: pa.RecordBatch) -> None:
        self._process(batch, 0, self.function.process_element1)

    def process_batch2(self, batch: pa.RecordBatch) -> None:
        self._process(batch, 1, self.function.process_element2)

    def _process(self, batch: pa.RecordBatch, side: int, process: Callable[..., None]) -> None:
        rows = rows_of(batch)
        stamp_column = self.timestamp_columns[side]
        stamps = batch.column(stamp_column).to_pylist() if stamp_column else [None] * len(rows)
        ctx, out = self._ctx, self._collector
        if self.key_columns is None:
            for row, stamp in zip(rows, stamps, strict=True):
                ctx._timestamp = stamp
                process(row, ctx, out)
        else:
            keys = batch.column(self.key_columns[side]).to_pylist()
            set_key = self.context.keyed_backend.set_current_key  # type: ignore[union-attr]
            for row, key, stamp in zip(rows, keys, stamps, strict=True):
                set_key(key)
                ctx._key, ctx._timestamp = key, stamp
                process(row, ctx, out)
        self._flush()

    def on_event_time(self, timestamp: int, key: Any) -> None:
        self._ctx._key, self._ctx._timestamp = key, timestamp
        self.function.on_timer(timestamp, self._ctx, self._collector)


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("process", ProcessOperator)
    register("keyed_process", KeyedProcessOperator)
    register("co_process", CoProcessOperator)
