"""Nexmark's persons, auctions or bids as a flintlock source: each epoch reads the next
range of event numbers, split evenly across the subtasks, so a replayed epoch (or a run at
another parallelism) reads exactly the same events."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TypedDict

import numpy as np
import pyarrow as pa

from flintlock import EpochSplits, SourceReader, UnboundedSource, WatermarkStrategy

from .model import KINDS, SCHEMAS, Generator, NexmarkConfig, kinds


class NexmarkState(TypedDict):
    """The enumerator's JSON state: the next event number to plan, and when the first
    epoch started (for a rate-limited source)."""

    next: int
    started_ms: int


class NexmarkSource(UnboundedSource):
    """The ``kind`` ("person", "auction" or "bid") events among event numbers ``0, 1, ...``
    up to ``events`` (None: unbounded), at most ``events_per_epoch`` per epoch (one
    checkpoint each), appearing at ``events_per_second`` of wall time (None: all at once).

    Several sources of the same ``config`` see one auction: a job joining bids with
    auctions reads two sources over the same event numbers."""

    def __init__(
        self,
        kind: str,
        events: int | None = None,
        events_per_epoch: int | None = None,
        events_per_second: float | None = None,
        config: NexmarkConfig | None = None,
        batch_size: int = 65536,
        paced_by_event_time: bool = False,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}, not {kind!r}")
        if (
            events is None
            and events_per_epoch is None
            and events_per_second is None
            and not paced_by_event_time
        ):
            raise ValueError("an unbounded Nexmark source needs events_per_epoch or a rate")
        self.kind = kind
        self.name = f"nexmark-{kind}"
        self.schema = SCHEMAS[kind]
        self.events = events
        self.events_per_epoch = events_per_epoch
        self.events_per_second = events_per_second
        self.config = config or NexmarkConfig()
        self.batch_size = batch_size
        self.paced_by_event_time = paced_by_event_time
        """Each event appears when the wall clock reaches its event time (latency runs:
        then output time minus an event time is the time since the event existed)."""

    def watermarks(self) -> WatermarkStrategy:
        """Event time from ``date_time``, bounded by the config's out-of-orderness."""
        bound = self.config.max_out_of_orderness_ms
        return WatermarkStrategy.for_bounded_out_of_orderness("date_time", bound)

    def initial_state(self, now_ms: int) -> NexmarkState:
        return {"next": 0, "started_ms": now_ms}

    def plan_epoch(self, state: NexmarkState, now_ms: int, parallelism: int) -> EpochSplits:
        first = int(state["next"])
        target: float = self.events if self.events is not None else math.inf
        if self.events_per_second is not None:
            elapsed = max(0, now_ms - int(state["started_ms"]))
            target = min(target, math.floor(elapsed * self.events_per_second / 1000))
        if self.paced_by_event_time:
            config = self.config
            due = (now_ms - config.base_time_ms) * config.event_rate // 1000 + 1
            target = min(target, max(due - config.out_of_order_group, 0))
        if self.events_per_epoch is not None:
            target = min(target, first + self.events_per_epoch)
        last = int(max(first, target))
        bounds = np.linspace(first, last, parallelism + 1).astype(np.int64).tolist()
        assignments = [
            [[bounds[i], bounds[i + 1]]] if bounds[i + 1] > bounds[i] else []
            for i in range(parallelism)
        ]
        exhausted = self.events is not None and last >= self.events
        return EpochSplits(assignments, {**state, "next": last}, exhausted)

    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[list[int]]
    ) -> SourceReader:
        return _EventReader(self, [(int(low), int(high)) for low, high in splits])


class _EventReader(SourceReader):
    """Reads event-number ranges ``[low, high)``, ``batch_size`` events at a time, keeping
    those of the source's kind."""

    def __init__(self, source: NexmarkSource, ranges: list[tuple[int, int]]) -> None:
        self._source = source
        self._ranges = ranges
        self._read: dict[str, int] = {}
        self._generator: Generator | None = None

    def read(self) -> Iterator[pa.RecordBatch]:
        source = self._source
        generator = self._generator = self._generator or Generator(source.config)
        kind = KINDS[source.kind]
        for low, high in self._ranges:
            for first in range(low, high, source.batch_size):
                events = np.arange(first, min(first + source.batch_size, high), dtype=np.int64)
                self._read[f"{low}-{high}"] = int(events[-1]) + 1
                yield generator.batch(kind, events[kinds(events) == kind])

    def positions(self) -> dict[str, int]:
        return dict(self._read)
