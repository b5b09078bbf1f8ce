"""How a vertex's output batches are split among the subtasks of the next vertex."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa

from flintlock.core.murmur import key_groups_of

PartitionerKind = Literal["forward", "rebalance", "broadcast", "hash"]


@dataclass(frozen=True)
class Partitioner:
    """A description of an edge's partitioning; ``key_column`` for ``hash``."""

    kind: PartitionerKind
    key_column: str | None = None

    def __str__(self) -> str:
        return f"hash({self.key_column})" if self.kind == "hash" else self.kind


FORWARD = Partitioner("forward")
REBALANCE = Partitioner("rebalance")
BROADCAST = Partitioner("broadcast")


def hash_by(column: str) -> Partitioner:
    """Route by key group of ``column`` (contiguous key group ranges per subtask)."""
    return Partitioner("hash", column)


class BatchSplitter:
    """Splits batches by target subtask for one edge, per batch (no per-record Python)."""

    def __init__(
        self,
        partitioner: Partitioner,
        own_subtask: int,
        target_parallelism: int,
        max_parallelism: int,
    ) -> None:
        self.partitioner = partitioner
        self.own_subtask = own_subtask
        self.parallelism = target_parallelism
        self.max_parallelism = max_parallelism
        self._next = own_subtask % target_parallelism

    def split(self, batch: pa.RecordBatch) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(target subtask, rows for it) pairs; rows keep their order within a target."""
        kind = self.partitioner.kind
        if kind == "forward":
            yield self.own_subtask, batch
        elif kind == "rebalance":
            target = self._next
            self._next = (self._next + 1) % self.parallelism
            yield target, batch
        elif kind == "broadcast":
            for target in range(self.parallelism):
                yield target, batch
        else:
            yield from self._split_by_key(batch)

    def _split_by_key(self, batch: pa.RecordBatch) -> Iterator[tuple[int, pa.RecordBatch]]:
        column = batch.column(self.partitioner.key_column)
        groups = key_groups_of(column, self.max_parallelism).astype(np.int64)
        targets = groups * self.parallelism // self.max_parallelism
        if self.parallelism == 1:
            yield 0, batch
            return
        order = np.argsort(targets, kind="stable")
        counts = np.bincount(targets, minlength=self.parallelism)
        ordered = batch.take(pa.array(order))
        start = 0
        for target, count in enumerate(counts.tolist()):
            if count:
                yield target, ordered.slice(start, count)
            start += count

    def targets(self) -> range:
        """Every subtask this edge can send to (control events go to all of them)."""
        if self.partitioner.kind == "forward":
            return range(self.own_subtask, self.own_subtask + 1)
        return range(self.parallelism)
