"""A sequence of ids at a given rate: the unbounded source of tests and benchmarks.

It needs no outside system, and a row's event time follows from its id alone, so a
replayed epoch reads the very same rows, as a test of exactly-once output needs."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TypedDict

import numpy as np
import pyarrow as pa

from flintlock.core.errors import GraphError
from flintlock.core.sources.epochs import EpochSplits, UnboundedSource
from flintlock.core.sources.source import SourceReader

SEQUENCE_SCHEMA = pa.schema([("id", pa.int64()), ("event_time", pa.int64())])


class SequenceState(TypedDict):
    """The enumerator's JSON state: the next id to plan, and when the job's first epoch
    started (event times count from it)."""

    next: int
    started_ms: int


class _RangeReader(SourceReader):
    """Reads id ranges ``[low, high)`` as batches of ``id`` and ``event_time``."""

    def __init__(self, source: SequenceSource, ranges: list[list[int]], started_ms: int) -> None:
        self._source = source
        self._ranges = ranges
        self._started_ms = started_ms
        self._read: dict[str, int] = {}

    def read(self) -> Iterator[pa.RecordBatch]:
        size = self._source.batch_size
        for low, high in self._ranges:
            for first in range(low, high, size):
                ids = np.arange(first, min(first + size, high), dtype=np.int64)
                times = self._source.event_times(ids, self._started_ms)
                self._read[f"{low}-{high}"] = int(ids[-1]) + 1
                yield pa.RecordBatch.from_arrays(
                    [pa.array(ids), pa.array(times)], schema=SEQUENCE_SCHEMA
                )

    def positions(self) -> dict[str, int]:
        return dict(self._read)


class SequenceSource(UnboundedSource):
    """Ids ``start, start + 1, ...`` with an ``event_time`` (epoch ms), appearing at
    ``rows_per_second`` from the job's first epoch on (all at once if None), up to ``end``
    (exclusive; None: never ends), at most ``rows_per_epoch`` per epoch.

    Row ``id`` gets event time ``first epoch's start + (id - start) * 1000 / rate`` (or
    ``id`` itself without a rate), so a replayed epoch reads the very same rows."""

    name = "sequence"
    schema = SEQUENCE_SCHEMA

    def __init__(
        self,
        rows_per_second: float | None = None,
        end: int | None = None,
        start: int = 0,
        rows_per_epoch: int | None = None,
        batch_size: int = 65536,
    ) -> None:
        if rows_per_second is not None and not rows_per_second > 0:
            raise GraphError(f"rows_per_second must be > 0, got {rows_per_second!r}")
        if end is not None and end < start:
            raise GraphError(f"end ({end}) is before start ({start})")
        if rows_per_second is None and end is None and rows_per_epoch is None:
            raise GraphError(
                "a sequence with no rate and no end needs rows_per_epoch: otherwise its first "
                "epoch would never end"
            )
        if rows_per_epoch is not None and rows_per_epoch < 1:
            raise GraphError(f"rows_per_epoch must be >= 1, got {rows_per_epoch!r}")
        self.rows_per_second = rows_per_second
        self.end = end
        self.start = start
        self.rows_per_epoch = rows_per_epoch
        self.batch_size = batch_size

    def event_times(self, ids: np.ndarray, started_ms: int) -> np.ndarray:
        """The event time of each id (deterministic: a replay reads the same rows)."""
        if self.rows_per_second is None:
            return ids
        offsets = (ids - self.start).astype(np.float64) * (1000.0 / self.rows_per_second)
        return started_ms + offsets.astype(np.int64)

    def initial_state(self, now_ms: int) -> SequenceState:
        return {"next": self.start, "started_ms": now_ms}

    def plan_epoch(self, state: SequenceState, now_ms: int, parallelism: int) -> EpochSplits:
        first = int(state["next"])
        if self.rows_per_second is None:
            target = self.end if self.end is not None else math.inf
        else:
            elapsed = max(0, now_ms - int(state["started_ms"]))
            target = self.start + math.floor(elapsed * self.rows_per_second / 1000)
            if self.end is not None:
                target = min(target, self.end)
        if self.rows_per_epoch is not None:
            target = min(target, first + self.rows_per_epoch)
        last = int(max(first, target))
        bounds = np.linspace(first, last, parallelism + 1).astype(np.int64).tolist()
        started = int(state["started_ms"])
        assignments = [
            [[bounds[i], bounds[i + 1], started]] if bounds[i + 1] > bounds[i] else []
            for i in range(parallelism)
        ]
        exhausted = self.end is not None and last >= self.end
        return EpochSplits(assignments, {**state, "next": last}, exhausted)

    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[list[int]]
    ) -> SourceReader:
        """A reader of ``splits``: ``[low, high, started_ms]`` id ranges."""
        started_ms = int(splits[0][2]) if splits else 0
        return _RangeReader(self, [[int(s[0]), int(s[1])] for s in splits], started_ms)
