"""ParquetSource: reads the files of a Parquet dataset, file i by subtask i mod parallelism.

Read with pyarrow inside the source task, so the split of files among subtasks is fixed by
their sorted order alone, and a subtask's position is the number of batches it read per
file: operator state, so a restore skips what its checkpoint already covered."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.dataset as ds

from flintlock.core.sources.source import Source, SourceReader


class _ParquetReader(SourceReader):
    def __init__(
        self, dataset: ds.Dataset, files: list[str], positions: dict[str, int], batch_size: int
    ) -> None:
        self._dataset = dataset
        self._files = files
        self._positions = {f: positions.get(f, 0) for f in files}
        self._batch_size = batch_size

    def read(self) -> Iterator[pa.RecordBatch]:
        for path in self._files:
            fragment = ds.dataset(path, format="parquet", filesystem=self._dataset.filesystem)
            for index, batch in enumerate(fragment.to_batches(batch_size=self._batch_size)):
                if index < self._positions[path]:
                    continue  # read before the checkpoint this subtask restored
                self._positions[path] = index + 1
                if batch.num_rows:
                    yield batch

    def positions(self) -> dict[str, int]:
        return dict(self._positions)


class ParquetSource(Source):
    """Every Parquet file under ``path`` (files and folders starting with ``_`` or ``.``
    are skipped, as pyarrow datasets do), bounded; positions count batches per file."""

    name = "parquet"

    def __init__(self, path: str, batch_size: int = 65536) -> None:
        self.path = path
        self.batch_size = batch_size
        self._schema: pa.Schema | None = None

    @property
    def schema(self) -> pa.Schema:  # type: ignore[override]
        """The dataset's schema (read from the files' metadata once, on the driver)."""
        if self._schema is None:
            self._schema = ds.dataset(self.path, format="parquet").schema
        return self._schema

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        dataset = ds.dataset(self.path, format="parquet")
        files = sorted(dataset.files)
        mine = [f for i, f in enumerate(files) if i % parallelism == subtask_index]
        return _ParquetReader(dataset, mine, positions, self.batch_size)
