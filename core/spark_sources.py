"""Sources that read what Spark hands a partition: a DataFrame's own Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from flintlock.core.source import Source, SourceReader

_partition_input: Iterator[pa.RecordBatch] | None = None
"""The Arrow batches of the partition the current Spark task reads (one task per worker)."""


def bind_partition_input(batches: Iterator[pa.RecordBatch] | None) -> None:
    """Hand the current Spark partition's batches to a DataFrameSource reader."""
    global _partition_input
    _partition_input = batches


class _PartitionReader(SourceReader):
    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._read = 0

    def read(self) -> Iterator[pa.RecordBatch]:
        for batch in self._batches:
            self._read += 1
            if batch.num_rows:
                yield batch

    def positions(self) -> dict[str, int]:
        return {"partition": self._read}


class DataFrameSource(Source):
    """Reads a Spark DataFrame: each of its partitions is one subtask's input (bounded)."""

    name = "dataframe"

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        if _partition_input is None:
            raise RuntimeError("a DataFrameSource reads only inside a flintlock Spark stage")
        return _PartitionReader(_partition_input)
