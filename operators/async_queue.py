"""The async operator's queue of in-flight rows and watermarks (Flink's
StreamElementQueue): ordered, or unordered between watermarks.

Ordered: results leave in input order; a watermark leaves when everything before it
did. Unordered: a result leaves as soon as it completes, but never across a watermark:
the rows before a watermark leave (in any order) before it, those after it after it."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flintlock import Watermark


@dataclass(eq=False)
class InFlight:
    """One input row whose async call runs (or whose result waits for its turn)."""

    seq: int
    """Its place in the input, over the whole epoch."""
    row: dict[str, Any] | None
    """None for a whole batch (``async_invoke_batch``)."""
    batch: pa.RecordBatch
    """The row's input batch and index (-1: the whole batch): its snapshot is a slice."""
    index: int
    results: list[dict[str, Any]] | pa.RecordBatch | None = None
    """Its rows once complete (an empty list: none), or its batch's."""
    segment: Segment | None = None

    @property
    def done(self) -> bool:
        return self.results is not None


@dataclass(eq=False)
class Segment:
    """The unordered queue's rows between two watermarks, and the watermark closing it."""

    pending: list[InFlight] = field(default_factory=list)
    ready: list[InFlight] = field(default_factory=list)
    watermark: Watermark | None = None


Element = InFlight | Watermark
"""What leaves the queue, in order: a completed row (its results) or a watermark."""


class OrderedQueue:
    """Rows and watermarks leave in the order they came."""

    def __init__(self) -> None:
        self.elements: deque[Element] = deque()
        self.rows = 0

    def add(self, entry: InFlight) -> None:
        self.elements.append(entry)
        self.rows += 1

    def add_watermark(self, watermark: Watermark) -> None:
        self.elements.append(watermark)

    def completed(self, entry: InFlight) -> None:
        """``entry`` has its results (they leave with ``ready``)."""

    def ready(self) -> list[Element]:
        """What may leave now, in order; removed from the queue."""
        out: list[Element] = []
        elements = self.elements
        while elements and (isinstance(elements[0], Watermark) or elements[0].done):
            element = elements.popleft()
            if isinstance(element, InFlight):
                self.rows -= 1
            out.append(element)
        return out

    def in_order(self) -> list[Element]:
        """Everything queued, as it came (for the snapshot)."""
        return list(self.elements)


class UnorderedQueue:
    """Rows leave as they complete, within the segment between two watermarks."""

    def __init__(self) -> None:
        self.segments: deque[Segment] = deque([Segment()])
        self.rows = 0

    def add(self, entry: InFlight) -> None:
        segment = self.segments[-1]
        entry.segment = segment
        segment.pending.append(entry)
        self.rows += 1

    def add_watermark(self, watermark: Watermark) -> None:
        self.segments[-1].watermark = watermark
        self.segments.append(Segment())

    def completed(self, entry: InFlight) -> None:
        segment = entry.segment
        assert segment is not None
        segment.pending.remove(entry)
        segment.ready.append(entry)

    def ready(self) -> list[Element]:
        out: list[Element] = []
        segments = self.segments
        while segments:
            first = segments[0]
            out.extend(first.ready)
            self.rows -= len(first.ready)
            first.ready = []
            if first.pending or first.watermark is None:
                break
            out.append(first.watermark)
            segments.popleft()
        if not segments:
            segments.append(Segment())
        return out

    def in_order(self) -> list[Element]:
        out: list[Element] = []
        for segment in self.segments:
            entries: list[InFlight] = sorted([*segment.pending, *segment.ready], key=_seq)
            out.extend(entries)
            if segment.watermark is not None:
                out.append(segment.watermark)
        return out


def _seq(entry: InFlight) -> int:
    return entry.seq
