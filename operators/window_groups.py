"""Window assignment for a whole batch at once (numpy): the per-record window operator's
rows grouped by (key, window), so its Python work per row is only the function's ``add``.

Used for tumbling and sliding event-time windows (a slide that divides the size) under
the default EventTimeTrigger; a batch with a row that would fire a window at once (late
within the allowed lateness) or with no event time keeps the row-by-row path, so what
fires, and the order timers are registered in, stay those of Flink's WindowOperator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from flintlock import SlidingEventTimeWindows, TumblingEventTimeWindows, WindowAssigner
from flintlock.plugin_api import event_time_millis


def window_shape(assigner: WindowAssigner) -> tuple[int, int, int] | None:
    """(size, slide, offset) when ``assigner``'s windows can be assigned per batch."""
    if type(assigner) is TumblingEventTimeWindows:
        return assigner.size, assigner.size, assigner.offset
    if type(assigner) is SlidingEventTimeWindows and assigner.size % assigner.slide == 0:
        return assigner.size, assigner.slide, assigner.offset
    return None


@dataclass(frozen=True)
class BatchGroups:
    """A batch's rows by (key, window): group ``g`` holds rows ``rows[bounds[g]:bounds[g+1]]``
    (in row order) of window ``starts[g]``; groups in the order their first row (and, for
    sliding windows, the assigner's window order) reaches them. ``late`` rows are past
    every window's allowed lateness."""

    rows: list[int]
    bounds: list[int]
    starts: list[int]
    late: np.ndarray


def group_batch(
    batch: pa.RecordBatch,
    timestamp_column: str,
    key_column: str | None,
    keys: list[Any],
    shape: tuple[int, int, int],
    allowed_lateness: int,
    watermark: int,
) -> BatchGroups | None:
    """Group ``batch``'s rows by (key, window); None if the batch needs the row path (a
    null event time, or a row that fires a window on arrival)."""
    size, slide, offset = shape
    column = event_time_millis(batch.column(timestamp_column), timestamp_column)
    if column.null_count:
        return None
    stamps = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
    codes = _key_codes(batch, key_column, keys)
    if codes is None:
        return None
    copies = size // slide
    last = stamps - (stamps - offset + slide) % slide
    # pair p = row * copies + j is the row's j-th window in the assigner's order (latest first)
    starts = (last[:, None] - np.arange(copies, dtype=np.int64) * slide).ravel()
    ends = starts + (size - 1)
    on_time = ends > watermark
    live = ends + allowed_lateness > watermark
    if not np.array_equal(on_time, live):
        return None  # a window fires on arrival: row by row, in row order
    late = ~live[::copies]  # a row's latest window is its first
    pairs = np.flatnonzero(live)
    pair_codes, pair_starts = np.repeat(codes, copies)[pairs], starts[pairs]
    order = np.lexsort((pairs, pair_starts, pair_codes))
    pairs, pair_codes, pair_starts = pairs[order], pair_codes[order], pair_starts[order]
    change = np.ones(len(pairs), dtype=bool)
    change[1:] = (pair_codes[1:] != pair_codes[:-1]) | (pair_starts[1:] != pair_starts[:-1])
    firsts = np.flatnonzero(change)
    by_arrival = np.argsort(pairs[firsts], kind="stable")
    rank = np.empty(len(firsts), dtype=np.int64)
    rank[by_arrival] = np.arange(len(firsts))
    # groups in arrival order, each group's rows contiguous and (stable sort) in row order
    take = np.argsort(rank[np.cumsum(change) - 1], kind="stable")
    rows = pairs[take] // copies
    sizes = np.diff(np.append(firsts, len(pairs)))
    bounds = np.concatenate(([0], np.cumsum(sizes[by_arrival])))
    return BatchGroups(
        rows.tolist(), bounds.tolist(), pair_starts[firsts][by_arrival].tolist(), late
    )


def _key_codes(batch: pa.RecordBatch, key_column: str | None, keys: list[Any]) -> Any:
    """An integer per row, equal for equal keys (None if a key is null)."""
    if key_column is not None:
        column = batch.column(key_column)
        if column.null_count:
            return None
        if pa.types.is_integer(column.type):  # the values are codes already
            return np.asarray(column.to_numpy(), dtype=np.int64)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        return np.asarray(column.dictionary_encode().indices.to_numpy(), dtype=np.int64)
    index: dict[Any, int] = {}
    return np.fromiter(
        (index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys)
    )
