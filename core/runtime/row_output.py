"""How per-record operators emit: rows their functions collect become one batch per step
(an input batch, a pass of timers) and a last one at finish."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from flintlock.core.api.functions import Collector
from flintlock.core.runtime.row_batches import HeldOutputMixin, RowBatchBuilder


class RowOutputMixin(HeldOutputMixin):
    """Collects rows (``self._collector``) and emits them through a RowBatchBuilder."""

    output: Any

    def _start_rows(self, operator_name: str, schema: pa.Schema | None) -> None:
        self._collector = Collector()
        self._builder = RowBatchBuilder(operator_name, schema)

    def _flush(self) -> None:
        if self._collector.rows:
            batch = self._builder.build(self._collector.take())
            if batch is not None:
                self.output.emit(batch)

    def after_timers(self) -> None:
        self._flush()

    def finish(self) -> None:
        super().finish()  # type: ignore[misc]
        self._flush()  # what the function's finish() collected
        self.emit_held()
