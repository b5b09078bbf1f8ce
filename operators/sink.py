"""The sink operator: hands batches (or records) to a SinkFunction; finish() flushes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from flintlock.core.functions import SinkFunction, overrides
from flintlock.core.operator import OneInputStreamOperator, UdfOperatorMixin
from flintlock.core.plugin_manager import hookimpl


class SinkOperator(UdfOperatorMixin, OneInputStreamOperator):
    """Writes each batch with ``write_batch`` (fast path) or ``invoke`` per record."""

    def __init__(self, function: SinkFunction, name: str | None = None) -> None:
        super().__init__(name or "sink")
        self.function = function
        self._per_batch = overrides(function, "write_batch", SinkFunction)

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if self._per_batch:
            self.function.write_batch(batch)
        else:
            invoke = self.function.invoke
            for row in batch.to_pylist():
                invoke(row)


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("sink", SinkOperator)
