"""How a vertex's output batches are split among the subtasks of the next vertex.

flintlock routes each batch to an exact target subtask itself, deterministically
(forward, round robin, broadcast, or by key group as Flink does), since keyed state finds
a key only on the subtask that owns its key group. A batch is split by vectorised key
groups, with no Python per record."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa

from flintlock.core.api.keys import ColumnKey, ColumnsKey, KeySelector
from flintlock.core.errors import KeyColumnError, tag_operator

PartitionerKind = Literal["forward", "rebalance", "broadcast", "hash"]


@dataclass(frozen=True)
class Partitioner:
    """A description of an edge's partitioning; ``key`` (a KeySelector) for ``hash``."""

    kind: PartitionerKind
    key: KeySelector | None = None

    @property
    def key_column(self) -> str | None:
        """The key column of a hash edge keyed by one column, else None."""
        return self.key.column if isinstance(self.key, ColumnKey) else None

    def __str__(self) -> str:
        if self.kind == "hash" and self.key is not None:
            return f"hash({self.key.describe()})"
        return self.kind


FORWARD = Partitioner("forward")
REBALANCE = Partitioner("rebalance")
BROADCAST = Partitioner("broadcast")


def hash_by(key: str | Sequence[str] | KeySelector) -> Partitioner:
    """Route by key group of the key (contiguous key group ranges per subtask): a column,
    a list of columns (one combined key) or a KeySelector."""
    if isinstance(key, str):
        key = ColumnKey(key)
    elif not isinstance(key, KeySelector):
        key = ColumnsKey(key)
    return Partitioner("hash", key)


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
        key = self.partitioner.key
        assert key is not None, "a hash partitioner has a key"
        if isinstance(key, ColumnKey | ColumnsKey):
            _check_key_columns(key, batch.schema)
        if self.parallelism == 1 or batch.num_rows == 0:
            yield 0, batch  # an empty batch still carries its schema downstream
            return
        groups = key.key_groups(batch, self.max_parallelism).astype(np.int64)
        targets = groups * self.parallelism // self.max_parallelism
        order, counts = _order_by_target(targets, self.parallelism)
        if max(counts) == batch.num_rows:  # one target: the batch as it is
            yield counts.index(batch.num_rows), batch
            return
        ordered = batch.take(pa.array(order))
        start = 0
        for target, count in enumerate(counts):
            if count:
                yield target, ordered.slice(start, count)
            start += count

    def targets(self) -> range:
        """Every subtask this edge can send to (control events go to all of them)."""
        if self.partitioner.kind == "forward":
            return range(self.own_subtask, self.own_subtask + 1)
        return range(self.parallelism)


def _order_by_target(targets: np.ndarray, parallelism: int) -> tuple[np.ndarray, list[int]]:
    """Row indices grouped by target, in row order within each, and the count per target.

    A pass per target for a few targets (faster than a sort there: bench/RESULTS.md,
    "Where the time went"), else a stable sort of small integers (numpy sorts them by
    radix)."""
    if parallelism <= 8:
        parts = [np.flatnonzero(targets == target) for target in range(parallelism)]
        return np.concatenate(parts), [len(p) for p in parts]
    order = np.argsort(targets.astype(np.int16), kind="stable")
    return order, np.bincount(targets, minlength=parallelism).tolist()


def _check_key_columns(key: ColumnKey | ColumnsKey, schema: pa.Schema) -> None:
    """Per batch: the key columns are in the rows (a schemaless map decides its columns
    only when it runs); the error names the key_by, not the operator that emitted."""
    missing = [column for column in key.columns if schema.get_field_index(column) < 0]
    if not missing:
        return
    where = f"key_by({key.describe()})"
    error = KeyColumnError(
        f"{where}: the rows reaching it have no column {', '.join(map(repr, missing))} "
        f"(their columns: {', '.join(schema.names) or 'none'}); the function before it "
        f"returns other columns: return the key column from it, give it an output_schema "
        f"so that key_by is checked when the job is built, or key_by a column it returns"
    )
    tag_operator(error, where, "routing its rows to subtasks")
    raise error
