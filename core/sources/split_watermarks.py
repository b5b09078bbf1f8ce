"""Per-split watermarks at a source's head, as Flink's Kafka source keeps them per
partition: one generator per split, the subtask's watermark the minimum over its splits
that are not idle.

A reader opts in by naming the split of each row (``SourceReader.split_ids``). The
subtask's splits are those of its epoch (the ones it holds positions of, at the minimum
until their first row, so the first rows of one partition cannot make another's late).
Epochs deal splits out anew, so each split's watermark and the processing time of its
last row outlive the epoch in union list state: whichever subtask reads the split next
starts from its watermark (the highest, where several subtasks kept one), and a late
row cannot pull it back. A split no subtask reads in an epoch (nothing new in it) does
not hold event time back there, unlike Flink, whose reader keeps it until it is idle;
counting it on every subtask would hold each subtask's watermark at where the other
subtasks' splits were at the last checkpoint, one epoch behind. A subtask with no split
in an epoch is idle for it (as a Flink reader without splits), so it does not hold the
operators after it back either."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TypedDict

import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.api.watermark_generators import WatermarkGenerator, WatermarkOutput
from flintlock.core.api.watermarks import WatermarkStrategy, as_millis
from flintlock.core.events import MIN_TIMESTAMP
from flintlock.core.runtime.processing_time import Clock
from flintlock.core.sources.watermark_emitter import WatermarkEmitter
from flintlock.core.state.descriptors import ListStateDescriptor
from flintlock.core.state.handles import ListState


class SplitWatermark(TypedDict):
    """One split's entry of the union state: its watermark and its last row's time."""

    split: str
    watermark: int
    last_active: int


SPLIT_WATERMARKS = ListStateDescriptor[SplitWatermark](
    "source-split-watermarks",
    pa.struct([("split", pa.string()), ("watermark", pa.int64()), ("last_active", pa.int64())]),
)


class _Split:
    """What the emitter knows of one split: restored, and this epoch's generator."""

    __slots__ = ("generator", "last_active", "output", "restored")

    def __init__(self, restored: int, last_active: int) -> None:
        self.restored, self.last_active = restored, last_active
        self.generator: WatermarkGenerator | None = None
        self.output = WatermarkOutput()

    @property
    def watermark(self) -> int:
        return max(self.restored, self.output.watermark)


class SplitWatermarkEmitter(WatermarkEmitter):
    """A WatermarkEmitter whose generator runs per split (``split_ids`` names each row's
    split); idleness is per split, measured from its last row, across epochs."""

    def __init__(
        self,
        strategy: WatermarkStrategy,
        clock: Clock,
        emit_batch: Callable[[pa.RecordBatch], None],
        emit_watermark: Callable[[int], None],
        emit_status: Callable[[bool], None],
        where: str,
        split_ids: Callable[[pa.RecordBatch], pa.Array],
        state: ListState[SplitWatermark],
        owned: Iterable[str] = (),
    ) -> None:
        super().__init__(strategy, clock, emit_batch, emit_watermark, emit_status, where)
        self._per_split = dataclasses.replace(strategy, idle_timeout=None)
        timeout = strategy.idle_timeout
        self._idle_after = None if timeout is None else as_millis(timeout)
        self._split_ids = split_ids
        self._state = state
        self.splits: dict[str, _Split] = {}
        for entry in state.get():  # union: every old subtask's entries; keep the highest
            known = self.splits.get(entry["split"])
            if known is None:
                self.splits[entry["split"]] = _Split(entry["watermark"], entry["last_active"])
            else:
                known.restored = max(known.restored, entry["watermark"])
                known.last_active = max(known.last_active, entry["last_active"])
        now = clock()
        self.mine: set[str] = set(owned)
        """The splits of this subtask's epoch, and any it read rows of: the minimum's."""
        for name in owned:  # assigned, not read yet: at the minimum until its first row
            self.splits.setdefault(name, _Split(MIN_TIMESTAMP, now))

    def _step(self, batch: pa.RecordBatch) -> None:
        self._emit_batch(batch)
        if batch.num_rows:
            stamps = self._timestamps(batch)
            ids = self._split_ids(batch)
            names = pc.unique(ids).to_pylist()
            now = self.clock()
            for name in names:
                if len(names) == 1:
                    part, part_stamps = batch, stamps
                else:
                    mask = pc.equal(ids, name)
                    part = batch.filter(mask)
                    part_stamps = stamps.filter(mask) if len(stamps) else stamps
                split = self._split(str(name), now)
                split.last_active = now
                assert split.generator is not None
                split.generator.on_event(part, part_stamps, split.output)
        millis = self.strategy.interval_millis
        now = self.clock()
        if millis is None or now - self._last_periodic >= millis:
            self._last_periodic = now
            for split in self.splits.values():
                if split.generator is not None:
                    split.generator.on_periodic_emit(split.output)
        self._combine(now)

    def end_of_reading(self) -> None:
        """The epoch's reading ended: its splits' minimum with the idleness that came to
        pass; a subtask without splits says it is idle."""
        if self.mine:
            self._combine(self.clock())
        elif not self.idle:
            self.idle = True
            self._emit_status(True)

    def snapshot(self) -> None:
        """Every known split's watermark and last row's time, into the union state."""
        self._state.update(
            [
                SplitWatermark(split=name, watermark=s.watermark, last_active=s.last_active)
                for name, s in sorted(self.splits.items())
            ]
        )

    def _split(self, name: str, now: int) -> _Split:
        split = self.splits.get(name)
        if split is None:
            split = self.splits[name] = _Split(MIN_TIMESTAMP, now)
        self.mine.add(name)
        if split.generator is None:
            split.generator = self._per_split.create_generator(self.clock)
        return split

    def _combine(self, now: int) -> None:
        idle_after = self._idle_after
        splits = [self.splits[name] for name in self.mine]
        active = [
            split.watermark
            for split in splits
            if idle_after is None or now - split.last_active < idle_after
        ]
        output = self.output
        if active:
            output.mark_active()
            output.emit_watermark(min(active))
        elif splits:
            output.mark_idle()
        self._apply()
