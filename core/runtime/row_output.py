"""How per-record operators emit: rows their functions collect become one batch per step
(an input batch, a pass of timers) and a last one at finish; or, when the next operator of
the chain works per record too, the rows go to it as they are (``RowsOutput``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.api.functions import Collector
from flintlock.core.errors import tag_operator
from flintlock.core.runtime.output import ChainingOutput
from flintlock.core.runtime.row_batches import HeldOutputMixin, RowBatchBuilder

if TYPE_CHECKING:
    from flintlock.core.hooks.runner import HookRunner
    from flintlock.core.runtime.operator import StreamOperator
    from flintlock.core.task_info import TaskInfo


class RowsOutput(ChainingOutput):
    """Hands a list of rows (dicts) straight to the next operator's ``process_rows``.

    The chain wires it where both operators work per record and no plugin wraps
    ``process_batch``: one loop per function per batch, no Arrow batch between them."""

    takes_rows = True

    def __init__(self, target: StreamOperator, hooks: HookRunner, task: TaskInfo) -> None:
        super().__init__(target, hooks, task)
        self._process_rows = target.process_rows  # type: ignore[attr-defined]

    def emit_rows(self, rows: list[dict[str, Any]]) -> None:
        """Send ``rows`` (not empty) to the next operator, as they are."""
        self.rows += len(rows)
        try:
            self._process_rows(rows)
        except BaseException as error:
            tag_operator(error, self.target.name, "process_batch")
            raise

    def seal(self, owner: str) -> None:
        super().seal(owner)
        self.emit_rows = self._emit_after_finish  # type: ignore[method-assign]


def emit_rows(output: Any, builder: RowBatchBuilder, rows: list[dict[str, Any]]) -> None:
    """Emit ``rows`` of a per-record function: as they are if the next operator takes
    rows and no output schema is declared (its values would be cast), else as a batch."""
    if output.takes_rows and not builder.declared:
        if rows:
            builder.check_rows(rows)
            output.emit_rows(rows)
        return
    batch = builder.build(rows)
    if batch is not None:
        output.emit(batch)


class RowOutputMixin(HeldOutputMixin):
    """Collects rows (``self._collector``) and emits them through a RowBatchBuilder."""

    output: Any

    def _start_rows(self, operator_name: str, schema: pa.Schema | None) -> None:
        self._collector = Collector()
        self._builder = RowBatchBuilder(operator_name, schema)

    def _flush(self) -> None:
        if self._collector.rows:
            emit_rows(self.output, self._builder, self._collector.take())

    def after_timers(self) -> None:
        self._flush()

    def finish(self) -> None:
        super().finish()  # type: ignore[misc]
        self._flush()  # what the function's finish() collected
        self.emit_held()
