"""The broadcast process operator: input 1 is the (keyed or not) main stream, input 2 the
broadcast stream whose rows every subtask sees and writes into its broadcast state.

Main rows get a read-only context and broadcast rows a writable one, because every
subtask's copy of the broadcast state stays equal only if every subtask makes the same
writes; the state is operator state, declared at ``open`` so that a restored copy is kept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flintlock import (
    BroadcastContext,
    BroadcastProcessFunction,
    KeySelector,
    TwoInputStreamOperator,
    hookimpl,
)
from flintlock.plugin_api import (
    BroadcastState,
    RowOutputMixin,
    StateDescriptor,
    UdfOperatorMixin,
    event_times,
    rows_of,
)


class BroadcastProcessOperator(
    RowOutputMixin, UdfOperatorMixin[BroadcastProcessFunction], TwoInputStreamOperator
):
    """Calls ``process_element`` per main row (state read-only) and
    ``process_broadcast_element`` per broadcast row (state writable)."""

    def __init__(
        self,
        function: BroadcastProcessFunction,
        state_names: tuple[str, ...],
        key_selector: KeySelector | None,
        timestamp_columns: tuple[str | None, str | None] = (None, None),
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__(name or "broadcast_process")
        self.function = function
        self.state_names = state_names
        self.key_selector = key_selector
        self.key_column = getattr(key_selector, "column", None)
        self.timestamp_columns = timestamp_columns
        self._start_rows(self.name, output_schema)
        self._read_only = BroadcastContext(self, writable=False)
        self._writable = BroadcastContext(self, writable=True)

    def broadcast_state(self, descriptor: StateDescriptor[Any]) -> BroadcastState[Any, Any]:
        """The broadcast state ``descriptor`` names; it must be declared on broadcast()."""
        if descriptor.name not in self.state_names:
            raise ValueError(
                f"broadcast state '{descriptor.name}' was not declared: pass its descriptor "
                f"to broadcast(...); declared: {list(self.state_names)}"
            )
        return self.context.operator_state.get_broadcast_state(descriptor.name)

    def open(self) -> None:
        super().open()
        for name in self.state_names:  # declared now, so a restored copy is kept
            self.context.operator_state.get_broadcast_state(name)

    def process_batch1(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            self.emit_empty()
            return
        rows = rows_of(batch)
        stamps = self._stamps(batch, 0, len(rows))
        ctx, out, process = self._read_only, self._collector, self.function.process_element
        if self.key_selector is None:
            for row, stamp in zip(rows, stamps, strict=True):
                ctx._timestamp = stamp
                process(row, ctx, out)
        else:
            set_key = self.context.keyed_backend.set_current_key  # type: ignore[union-attr]
            for row, key, stamp in zip(rows, self.key_selector.keys(batch), stamps, strict=True):
                set_key(key)
                ctx._key, ctx._timestamp = key, stamp
                process(row, ctx, out)
        self._flush()

    def process_batch2(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        rows = rows_of(batch)
        ctx, out = self._writable, self._collector
        process = self.function.process_broadcast_element
        for row, stamp in zip(rows, self._stamps(batch, 1, len(rows)), strict=True):
            ctx._timestamp = stamp
            process(row, ctx, out)
        self._flush()

    def _stamps(self, batch: pa.RecordBatch, side: int, count: int) -> list[int | None]:
        column = self.timestamp_columns[side]
        return event_times(batch, column) if column else [None] * count


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("broadcast_process", BroadcastProcessOperator)
