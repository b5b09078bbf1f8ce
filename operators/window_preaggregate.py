"""The local half of two-phase window aggregation (Flink SQL's local/global aggregate):
chained to the operator before ``key_by``, it turns each batch into partial aggregates
per (key, window start), so the keyed exchange carries partials instead of rows.

Each batch's partials are emitted at once, where its rows would have gone: the
downstream ``BatchWindowAggregateOperator(pre_aggregated=True)`` then judges every
partial late or on time by its window start at the same point of the stream as it would
judge the rows, and counts late rows from the partial's LATEST column, so results and
``late_records_dropped`` equal the one-phase plan's. Nothing is held between batches,
so there is nothing to flush before a barrier and no state to snapshot.

Adaptive: where a batch's partials are nearly as many as its rows (about one row per
key and window), the next ``PROBE_EVERY`` batches go on as rows (only the columns the
window reads), which the window takes as in the one-phase plan; then it tries again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from flintlock import KeySelector, hookimpl
from flintlock.operators.window_batch import LATEST, START, ColumnWindowOperator

PROBE_EVERY = 16
"""Batches passed on as rows after one whose partials did not pay."""
POOR_REDUCTION = 0.5
"""Partials per (row, window) pair above which pre-aggregating a batch does not pay."""


class WindowPreAggregateOperator(ColumnWindowOperator):
    """Rows in, partial aggregates per (key columns, window start) out, batch by batch
    (or the rows' needed columns, where partials would not be fewer)."""

    def __init__(
        self,
        assigner: Any,
        aggregates: dict[str, tuple[str, str]],
        key_selector: KeySelector,
        timestamp_column: str,
        name: str | None = None,
        poor_reduction: float = POOR_REDUCTION,
    ) -> None:
        super().__init__(
            name or "window_preaggregate", assigner, aggregates, key_selector, timestamp_column
        )
        self.poor_reduction = poor_reduction
        self._rows_for = 0  # batches still to pass on as rows
        needed = [*self.key_names, timestamp_column, *(c for c, _ in self._partials)]
        self._needed = list(dict.fromkeys(needed))

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        if self._rows_for:
            self._rows_for -= 1
            self.output.emit(batch.select(self._needed))
            return
        rows, starts = self._window_pairs(batch, "window pre-aggregation")
        latest = np.zeros(len(rows), dtype=np.int64)
        latest[: batch.num_rows] = 1  # copy 0 holds each row's latest window
        indices = pa.array(rows) if len(rows) != batch.num_rows else None
        columns: dict[str, Any] = {}
        for name in self.key_names:
            columns[name] = _take(batch.column(name), indices)
        columns[START] = pa.array(starts, pa.int64())
        for column_name, _ in self._partials:
            if column_name not in columns:
                columns[column_name] = _take(batch.column(column_name), indices)
        columns[LATEST] = pa.array(latest)
        grouped = (
            pa.table(columns)
            .group_by([*self.key_names, START], use_threads=False)
            .aggregate([*self._partials, (LATEST, "sum")])
        )
        names = [*self.key_names, START, *(f"{c}_{p}" for c, p in self._partials)]
        arrays = [grouped.column(name) for name in names] + [grouped.column(f"{LATEST}_sum")]
        table = pa.table(arrays, names=[*names, LATEST]).combine_chunks()
        if table.num_rows > self.poor_reduction * len(rows):
            self._rows_for = PROBE_EVERY
        self.output.emit(table.to_batches()[0])


def _take(column: pa.Array, indices: pa.Array | None) -> pa.Array:
    return column if indices is None else column.take(indices)


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("window_preaggregate", WindowPreAggregateOperator)
