"""Sources: readers over splits, whose positions are operator state, at a source task's head.

Sources are task types too: a reader's positions are the source operator's list state
(``POSITIONS``), so they are checkpointed, restored and redistributed like any operator
state, and a restored subtask reads on from where its checkpoint left off. The watermark
strategy runs at the head, where batches enter event time."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import pyarrow as pa

from flintlock.core.api.watermarks import WatermarkStrategy
from flintlock.core.events import Watermark
from flintlock.core.runtime.operator import StreamOperator
from flintlock.core.runtime.records import table_of_rows
from flintlock.core.sources.split_watermarks import SPLIT_WATERMARKS, SplitWatermarkEmitter
from flintlock.core.sources.watermark_emitter import WatermarkEmitter
from flintlock.core.state.descriptors import ListStateDescriptor

if TYPE_CHECKING:
    from flintlock.core.api.functions import Row


class SplitPosition(TypedDict):
    """One element of a source's position state: how far the reader got in one split."""

    split: str
    position: int


POSITIONS = ListStateDescriptor[SplitPosition](
    "source-positions", pa.struct([("split", pa.string()), ("position", pa.int64())])
)


@dataclass(frozen=True)
class SourceEpoch:
    """What a source subtask of an unbounded source is told about its epoch (shipped in
    the execution plan; see ``flintlock.core.sources.epochs``)."""

    splits: list[Any] = field(default_factory=list)
    """This subtask's JSON splits of the epoch, as the source's enumerator planned them."""
    ends_input: bool = False
    """The input ends after these splits (the source is exhausted, or a stop drains)."""


class SourceReader(ABC):
    """Reads the splits of one subtask, from restored positions on."""

    @abstractmethod
    def read(self) -> Iterator[pa.RecordBatch]:
        """The remaining batches, in order; positions advance as they are yielded."""

    @abstractmethod
    def positions(self) -> dict[str, int]:
        """How far each split was read (part of the checkpoint)."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release files or connections."""

    def split_ids(self, batch: pa.RecordBatch) -> pa.Array | None:
        """The split of each row of ``batch`` (the names ``positions`` uses), for
        per-split watermarks; None (the default): watermarks are per subtask."""
        return None


class Source(ABC):
    """A bounded or unbounded source of record batches, read by a source task."""

    name = "source"

    bounded = True
    """Bounded sources are read to their end in one epoch; see ``UnboundedSource``."""

    schema: pa.Schema | None = None
    """The schema of the batches it reads, if known on the driver (None: unknown).

    A known schema lets the DataStream API check the job before Spark starts (key
    columns, watermark columns); a source that declares one must read batches of it."""

    @abstractmethod
    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        """A reader for the splits ``subtask_index`` owns, resuming at ``positions``."""


class _CollectionReader(SourceReader):
    def __init__(self, splits: dict[str, list[pa.RecordBatch]], positions: dict[str, int]):
        self._splits = splits
        self._positions = {name: positions.get(name, 0) for name in splits}

    def read(self) -> Iterator[pa.RecordBatch]:
        for name, batches in self._splits.items():
            while self._positions[name] < len(batches):
                batch = batches[self._positions[name]]
                self._positions[name] += 1
                yield batch

    def positions(self) -> dict[str, int]:
        return dict(self._positions)


class CollectionSource(Source):
    """Batches (or rows, grouped ``batch_size`` at a time) held in memory; split i of the
    batches goes to subtask i mod parallelism.

    Rows are typed by ``schema`` or by inference over all of them; an empty collection
    with a known schema is read as one empty batch (by subtask 0), so it keeps its schema."""

    name = "collection"

    def __init__(
        self,
        data: Sequence[pa.RecordBatch] | Sequence[Row] | pa.Table,
        batch_size: int = 65536,
        schema: pa.Schema | None = None,
    ) -> None:
        if isinstance(data, pa.Table):
            self.batches = data.to_batches(max_chunksize=batch_size)
            self.schema = data.schema
        elif data and isinstance(data[0], pa.RecordBatch):
            self.batches = list(data)
            self.schema = schema or self.batches[0].schema
        else:
            table = table_of_rows(data, schema, "from_collection")
            self.batches = table.to_batches(max_chunksize=batch_size) if table.num_rows else []
            self.schema = table.schema if (schema is not None or table.num_columns) else None
        if not self.batches and self.schema is not None:
            self.batches = [pa.RecordBatch.from_pylist([], schema=self.schema)]

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        mine = [b for i, b in enumerate(self.batches) if i % parallelism == subtask_index]
        return _CollectionReader({f"collection-{subtask_index}": mine}, positions)


class SourceOperator(StreamOperator):
    """Head of a source task: reads its source's splits and emits batches and watermarks."""

    def __init__(
        self,
        source: Source,
        watermark_strategy: WatermarkStrategy | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name or f"source:{source.name}")
        self.source = source
        self.watermark_strategy = watermark_strategy
        self._reader: SourceReader | None = None
        self._batches: Iterator[pa.RecordBatch] = iter(())
        self._emitter: WatermarkEmitter | None = None
        self.records_read = 0
        self.epoch: SourceEpoch | None = None
        """Set at deploy for an unbounded source: the splits of this epoch."""

    @property
    def ends_input(self) -> bool:
        """True if the input ends once this epoch's reading is done (MAX_WATERMARK and
        finish follow): always for a bounded source, on the last epoch for others."""
        return self.source.bounded or (self.epoch is not None and self.epoch.ends_input)

    def initialize_state(self) -> None:
        self._positions = self.context.operator_state.get_list_state(POSITIONS)

    def open(self) -> None:
        task = self.context.task
        if self.source.bounded:
            restored = {p["split"]: p["position"] for p in self._positions.get()}
            self._reader = self.source.create_reader(task.subtask_index, task.parallelism, restored)
        else:
            splits = self.epoch.splits if self.epoch is not None else []
            self._reader = self.source.create_epoch_reader(  # type: ignore[attr-defined]
                task.subtask_index, task.parallelism, splits
            )
        self._batches = self._reader.read()
        strategy = self.watermark_strategy
        if strategy is not None:
            self._emitter = self._watermark_emitter(strategy, self._reader)

    def _watermark_emitter(
        self, strategy: WatermarkStrategy, reader: SourceReader
    ) -> WatermarkEmitter:
        """Per split where the reader names each row's split (overrides ``split_ids``),
        else per subtask."""
        emitter_of: Any = WatermarkEmitter
        more: dict[str, Any] = {}
        if type(reader).split_ids is not SourceReader.split_ids:
            emitter_of = SplitWatermarkEmitter
            state = self.context.operator_state.get_union_list_state(SPLIT_WATERMARKS)
            more = {"split_ids": reader.split_ids, "state": state, "owned": reader.positions()}
        emitter: WatermarkEmitter = emitter_of(
            strategy,
            self.context.processing_time.clock,  # type: ignore[union-attr]
            lambda batch: self.output.emit(batch),
            lambda timestamp: self.process_watermark(Watermark(timestamp)),
            lambda idle: self.output.emit_watermark_status(idle),
            f"source '{self.name}'",
            **more,
        )
        return emitter

    def emit_next(self) -> bool:
        """Emit the next batch (and the watermarks after it); False once the input ended."""
        batch = next(self._batches, None)
        if batch is None:
            if isinstance(self._emitter, SplitWatermarkEmitter):
                self._emitter.end_of_reading()
            return False
        self.records_read += batch.num_rows
        if self._emitter is None:
            self.output.emit(batch)
        else:
            self._emitter.process(batch)
        return True

    def snapshot_state(self, checkpoint_id: int) -> None:
        if isinstance(self._emitter, SplitWatermarkEmitter):
            self._emitter.snapshot()
        if self._reader is not None:
            self._positions.update(
                [{"split": s, "position": p} for s, p in sorted(self._reader.positions().items())]
            )

    def close_reader(self) -> None:
        """Release the source reader; the source task calls it in its task-specific
        cleanup, after every operator of the chain closed (they may still need it)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
