"""The ``delta`` source: a Delta Lake table read with delta-rs and pyarrow (no JVM).

A split is one data file of a table version (its path and partition values); subtask i
reads files i, i + parallelism, ... with pyarrow.parquet and adds the partition columns.
Bounded (``DeltaSource``): the files of one version, pinned on the driver when the job is
built. Unbounded (``DeltaStreamSource``): that version's files in the first epoch, then in
each epoch the files later versions added; the version read so far is the enumerator's
state, stored in every checkpoint, so a restore continues exactly there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flintlock import EpochSplits, PluginError, Source, SourceReader, UnboundedSource, hookimpl
from flintlock.sinks.delta_files import (
    arrow_filesystem,
    deltalake,
    load_table,
    partition_string,
    schema_differences,
)

UNSUPPORTED = {
    "deletionVectors": "deletion vectors",
    "columnMapping": "column mapping",
}
"""Reader features whose files pyarrow alone would read wrongly: such tables are refused."""


class _DeltaFiles:
    """What the driver knows of the table: where it is, its schema, and its files per
    version (the part the bounded and unbounded sources share)."""

    def __init__(
        self,
        uri: str,
        version: int | None,
        storage_options: dict[str, str] | None,
        batch_size: int,
    ) -> None:
        try:
            found = load_table(uri, storage_options)
        except (deltalake().exceptions.DeltaError, OSError) as error:
            raise PluginError(f"from_delta: cannot read the Delta table {uri}: {error}") from error
        if found is None:
            raise PluginError(f"from_delta: there is no Delta table at {uri}")
        self.uri = uri if "://" in uri else os.path.abspath(uri)
        self.storage_options = storage_options
        self.batch_size = batch_size
        table = self.table_at(version)
        self.version = table.version()
        self.schema = pa.schema(table.schema().to_arrow())
        self.partition_by = list(table.metadata().partition_columns)
        self._check_features(table)

    def table_at(self, version: int | None = None) -> Any:
        """The table at ``version`` (None: the newest)."""
        module = deltalake()
        try:
            return module.DeltaTable(
                self.uri, version=version, storage_options=self.storage_options
            )
        except Exception as error:
            raise PluginError(
                f"from_delta: cannot read version {version} of the Delta table {self.uri}: {error}"
            ) from error

    def _check_features(self, table: Any) -> None:
        features = set(table.protocol().reader_features or [])
        refused = [text for name, text in UNSUPPORTED.items() if name in features]
        if refused:
            raise PluginError(
                f"from_delta: the Delta table {self.uri} uses {' and '.join(refused)}, which "
                f"the delta source does not read (it reads the data files with pyarrow)"
            )

    def files(self, table: Any) -> dict[str, dict[str, str | None]]:
        """The data files of ``table``'s version: relative path -> partition values."""
        actions = pa.table(table.get_add_actions())
        partitions = (
            actions.column("partition").to_pylist()
            if "partition" in actions.column_names  # absent for an unpartitioned table
            else [{}] * actions.num_rows
        )
        return {
            unquote(path): {name: partition_string(value) for name, value in values.items()}
            for path, values in zip(actions.column("path").to_pylist(), partitions, strict=True)
        }

    def splits(self, table: Any, paths: list[str] | None = None) -> list[list[Any]]:
        """JSON splits of ``paths`` (default: every file of the version), sorted."""
        files = self.files(table)
        return [[path, files[path]] for path in sorted(files if paths is None else paths)]

    def reader(
        self, subtask_index: int, parallelism: int, splits: list[list[Any]], positions: Any
    ) -> SourceReader:
        mine = [s for i, s in enumerate(splits) if i % parallelism == subtask_index]
        return _DeltaReader(self, mine, positions)


class _DeltaReader(SourceReader):
    """Reads its data files batch by batch, with the partition columns added."""

    def __init__(self, files: _DeltaFiles, splits: list[list[Any]], positions: Any) -> None:
        self._files = files
        self._splits = splits
        self._positions = {path: positions.get(path, 0) for path, _ in splits}

    def read(self) -> Iterator[pa.RecordBatch]:
        source = self._files
        if "://" in source.uri:
            filesystem, root = arrow_filesystem(source.uri, source.storage_options)
        else:
            filesystem, root = pafs.LocalFileSystem(), source.uri
        for path, partition in self._splits:
            location = path if "://" in path else f"{root.rstrip('/')}/{path}"
            parquet = pq.ParquetFile(location, filesystem=filesystem)
            for index, batch in enumerate(parquet.iter_batches(batch_size=source.batch_size)):
                if index < self._positions[path]:
                    continue  # read before the checkpoint this subtask restored
                self._positions[path] = index + 1
                if batch.num_rows:
                    yield _with_partition(batch, partition, source.schema)

    def positions(self) -> dict[str, int]:
        return dict(self._positions)


def _with_partition(
    batch: pa.RecordBatch, partition: dict[str, str | None], schema: pa.Schema
) -> pa.RecordBatch:
    """``batch`` in the table's columns: partition values as constant columns, columns the
    file lacks (added to the table later) as nulls, every column cast to the table's type."""
    columns = []
    for field in schema:
        if field.name in partition:
            value = partition[field.name]
            scalar = pa.scalar(value, pa.string()).cast(field.type)
            columns.append(pa.repeat(scalar, batch.num_rows))
        elif field.name in batch.schema.names:
            columns.append(pc.cast(batch.column(field.name), field.type))
        else:
            columns.append(pa.nulls(batch.num_rows, field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class DeltaSource(Source):
    """The rows of one version of a Delta table (default: the newest when the job is
    built), bounded; positions count batches per data file."""

    name = "delta"

    def __init__(
        self,
        uri: str,
        version: int | None = None,
        storage_options: dict[str, str] | None = None,
        batch_size: int = 65536,
    ) -> None:
        self.table = _DeltaFiles(uri, version, storage_options, batch_size)
        self.schema = self.table.schema
        self.splits = self.table.splits(self.table.table_at(self.table.version))

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        return self.table.reader(subtask_index, parallelism, self.splits, positions)


class DeltaStreamSource(UnboundedSource):
    """A Delta table read as it grows: ``version`` (default: the newest when the job is
    built) in the first epoch, then per epoch the files the later versions added.

    The table must only be appended to: a version that removes files (overwrite, delete,
    optimize) is refused, since its rows would be read twice or not be taken back."""

    name = "delta"

    def __init__(
        self,
        uri: str,
        version: int | None = None,
        storage_options: dict[str, str] | None = None,
        batch_size: int = 65536,
    ) -> None:
        self.table = _DeltaFiles(uri, version, storage_options, batch_size)
        self.schema = self.table.schema

    def initial_state(self, now_ms: int) -> dict[str, Any]:
        return {"version": None, "start": self.table.version}

    def plan_epoch(self, state: Any, now_ms: int, parallelism: int) -> EpochSplits:
        files = self.table
        if state["version"] is None:  # the first epoch: the whole starting version
            start = int(state["start"])
            return self._epoch(files.splits(files.table_at(start)), start, parallelism)
        read = int(state["version"])
        newest = files.table_at()
        if newest.version() <= read:
            return EpochSplits([[] for _ in range(parallelism)], state)
        before, after = files.files(files.table_at(read)), files.files(newest)
        removed = sorted(before.keys() - after.keys())
        if removed:
            raise PluginError(
                f"the delta source of {files.uri} reads tables that are only appended to: "
                f"between versions {read} and {newest.version()}, {len(removed)} files were "
                f"removed (e.g. {removed[0]}; an overwrite, delete or optimize). Read the "
                f"table bounded (from_delta(..., unbounded=False)) or from a new version"
            )
        differences = schema_differences(
            pa.schema(newest.schema().to_arrow()), self.schema, "the table now", "the job's schema"
        )
        if differences:
            raise PluginError(
                f"the Delta table {files.uri} changed its schema after the job started "
                f"(version {newest.version()}): {'; '.join(differences)}"
            )
        added = sorted(after.keys() - before.keys())
        splits = [[path, after[path]] for path in added]
        return self._epoch(splits, newest.version(), parallelism)

    def _epoch(self, splits: list[list[Any]], version: int, parallelism: int) -> EpochSplits:
        assignments = [splits[i::parallelism] for i in range(parallelism)]
        return EpochSplits(assignments, {"version": version, "start": self.table.version})

    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[Any]
    ) -> SourceReader:
        return self.table.reader(0, 1, splits, {})


def delta_source(
    uri: str,
    version: int | None = None,
    unbounded: bool = False,
    storage_options: dict[str, str] | None = None,
    batch_size: int = 65536,
) -> Source:
    """The source ``env.from_delta`` builds: bounded or unbounded."""
    if unbounded:
        return DeltaStreamSource(uri, version, storage_options, batch_size)
    return DeltaSource(uri, version, storage_options, batch_size)


@hookimpl
def flintlock_register_sources(register: Callable[[str, Any], None]) -> None:
    register("delta", delta_source)
