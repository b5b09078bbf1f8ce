"""The ``iceberg`` source: an Apache Iceberg table read through pyiceberg (no JVM).

Bounded: the data files of one snapshot, file i by subtask i mod parallelism. Unbounded:
the first epoch reads a snapshot whole, each later epoch the data files that snapshots
appended since the last one; the snapshot id read up to is the enumerator's state, so
the checkpoint holds it and a restore continues exactly there. A split is one data file
of one snapshot; readers open the snapshot from its metadata file (no catalog in tasks)
and read the file with its deletes applied, as pyiceberg's scan does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from flintlock import (
    EpochSplits,
    FlintlockError,
    GraphError,
    PluginError,
    Source,
    SourceReader,
    UnboundedSource,
    hookimpl,
)
from flintlock.sinks import iceberg_tables as tables

WHO = "from_iceberg"
APPENDS = {"append"}
"""Snapshot operations whose added files an unbounded read emits."""
REWRITES = {"replace"}
"""Operations that only rewrite rows already read (compaction): skipped."""


class _IcebergReader(SourceReader):
    """Reads its splits (data files of snapshots) in order; positions count batches."""

    def __init__(self, source: _IcebergTable, splits: list[Any], positions: dict[str, int]):
        self._source = source
        self._splits = splits
        self._positions = {s["file"]: positions.get(s["file"], 0) for s in splits}
        self._plans: dict[tuple[str, int], dict[str, Any]] = {}

    def read(self) -> Iterator[pa.RecordBatch]:
        size = self._source.batch_size
        for split in self._splits:
            index = 0
            for batch in self._batches(split):
                for start in range(0, batch.num_rows, size):
                    if index >= self._positions[split["file"]]:  # else read before a restore
                        self._positions[split["file"]] = index + 1
                        yield batch.slice(start, size)
                    index += 1

    def _batches(self, split: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        pyarrow_io = tables.pyiceberg("pyiceberg.io.pyarrow", WHO)
        key = (split["metadata"], int(split["snapshot"]))
        if key not in self._plans:
            static = tables.pyiceberg("pyiceberg.table", WHO).StaticTable.from_metadata(
                split["metadata"], properties=self._source.io_properties
            )
            tasks = static.scan(snapshot_id=key[1]).plan_files()
            self._plans[key] = {"table": static, "tasks": {t.file.file_path: t for t in tasks}}
        plan = self._plans[key]
        task = plan["tasks"].get(split["file"])
        if task is None:
            raise PluginError(
                f"{WHO}: data file {split['file']} is not in snapshot {key[1]} of Iceberg "
                f"table {self._source.table} (expired or rewritten since it was planned)"
            )
        schema = self._source.iceberg_schema()
        scan = pyarrow_io.ArrowScan(
            plan["table"].metadata,
            plan["table"].io,
            schema,
            tables.pyiceberg("pyiceberg.expressions", WHO).AlwaysTrue(),
        )
        declared = self._source.schema
        for batch in scan.to_record_batches([task]):
            yield batch if batch.schema == declared else batch.select(declared.names).cast(declared)

    def positions(self) -> dict[str, int]:
        return dict(self._positions)


class _IcebergTable:
    """What both Iceberg sources share: the table, its schema, and the splits of its
    snapshots (planned on the driver, from the catalog)."""

    name = "iceberg"
    schema: pa.Schema

    def __init__(
        self,
        table: str,
        catalog: dict[str, Any] | str | None = None,
        warehouse: str | None = None,
        snapshot_id: int | None = None,
        batch_size: int = 65536,
        catalog_name: str = tables.EMBEDDED_CATALOG,
    ) -> None:
        try:
            tables.split_identifier(table, WHO)
            self.catalog = tables.catalog_spec(catalog, warehouse, WHO, catalog_name)
            loaded = self._load(table)
        except FlintlockError:
            raise
        except Exception as error:
            raise GraphError(
                f"{WHO}: cannot read Iceberg table '{table}': {type(error).__name__}: {error}"
            ) from error
        self.table = table
        self.batch_size = batch_size
        self.snapshot_id = snapshot_id
        snapshot = loaded.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
        if snapshot_id is not None and snapshot is None:
            raise GraphError(f"{WHO}: Iceberg table '{table}' has no snapshot {snapshot_id}")
        schema = loaded.schemas().get(snapshot.schema_id) if snapshot else None
        schema = schema or loaded.schema()
        self._schema_json = schema.model_dump_json()
        self.schema = tables.arrow_schema(schema)
        self.io_properties = dict(loaded.io.properties)
        self._prepare(loaded)

    def _prepare(self, table: Any) -> None:
        """Plan what the job needs of ``table`` when it is built (on the driver)."""

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_catalog", None)
        state.pop("_iceberg_schema", None)
        return state

    def _load(self, table: str) -> Any:
        catalog = getattr(self, "_catalog", None)
        if catalog is None:
            catalog = self._catalog = tables.load_catalog(self.catalog, WHO)
        return catalog.load_table(table)

    def iceberg_schema(self) -> Any:
        """The schema rows are read with (the table's when the job was built)."""
        schema = getattr(self, "_iceberg_schema", None)
        if schema is None:
            module = tables.pyiceberg("pyiceberg.schema", WHO)
            schema = self._iceberg_schema = module.Schema.model_validate_json(self._schema_json)
        return schema

    def _whole(self, table: Any, snapshot_id: int | None) -> list[dict[str, Any]]:
        """Splits reading snapshot ``snapshot_id`` whole (none for an empty table)."""
        if snapshot_id is None:
            return []
        tasks = table.scan(snapshot_id=snapshot_id).plan_files()
        return _splits(table, snapshot_id, sorted(t.file.file_path for t in tasks))


class IcebergSource(_IcebergTable, Source):
    """Bounded: the rows of one snapshot of an Iceberg table (``snapshot_id``, default
    the current one); the table is given as ``IcebergSink`` takes it (``catalog``
    properties or name, or ``warehouse`` of the embedded SQL catalog)."""

    def _prepare(self, table: Any) -> None:
        target = self.snapshot_id if self.snapshot_id is not None else _current_id(table)
        self.files = self._whole(table, target)

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        mine = [f for i, f in enumerate(self.files) if i % parallelism == subtask_index]
        return _IcebergReader(self, mine, positions)


class IcebergStreamSource(_IcebergTable, UnboundedSource):
    """Unbounded: the first epoch reads a snapshot whole (``snapshot_id``, default the
    current one when the job starts), each later epoch the data files that snapshots
    appended since; the state (the source's offset) is the snapshot id read up to."""

    def initial_state(self, now_ms: int) -> Any:
        return {"snapshot": None, "started": False}

    def plan_epoch(self, state: Any, now_ms: int, parallelism: int) -> EpochSplits:
        table = self._load(self.table)
        current = _current_id(table)
        if not state["started"]:
            target = self.snapshot_id if self.snapshot_id is not None else current
            splits = self._whole(table, target)
        elif current is None or current == state["snapshot"]:
            target, splits = state["snapshot"], []
        elif state["snapshot"] is None:
            target, splits = current, self._whole(table, current)
        else:
            target, splits = current, self._appended(table, int(state["snapshot"]), current)
        assignments: list[list[Any]] = [[] for _ in range(parallelism)]
        for index, split in enumerate(splits):
            assignments[index % parallelism].append(split)
        return EpochSplits(assignments, {"snapshot": target, "started": True})

    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[Any]
    ) -> SourceReader:
        return _IcebergReader(self, splits, {})

    def _appended(self, table: Any, after: int, until: int) -> list[dict[str, Any]]:
        """Splits of the files snapshots after ``after`` up to ``until`` appended."""
        snapshots = tables.pyiceberg("pyiceberg.table.snapshots", WHO)
        if not snapshots.is_ancestor_of(until, after, table.metadata):
            raise PluginError(
                f"{WHO}: snapshot {after} of Iceberg table {self.table}, where this job read "
                f"up to, is no longer an ancestor of the current snapshot {until} (rolled back "
                f"or expired); start the job anew to read the table again"
            )
        added = tables.pyiceberg("pyiceberg.manifest", WHO).ManifestEntryStatus.ADDED
        splits = []
        newer = list(snapshots.ancestors_between_ids(after, until, table.metadata))
        for snapshot in reversed(newer):  # oldest first
            operation = snapshot.summary.operation.value if snapshot.summary else "append"
            if operation in REWRITES:
                continue
            if operation not in APPENDS:
                raise PluginError(
                    f"{WHO}: snapshot {snapshot.snapshot_id} of Iceberg table {self.table} is "
                    f"an {operation}: an unbounded read emits appended rows only and cannot "
                    f"take rows back; read the table bounded, or start anew after it"
                )
            paths = [
                entry.data_file.file_path
                for manifest in snapshot.manifests(table.io)
                if manifest.added_snapshot_id == snapshot.snapshot_id
                for entry in manifest.fetch_manifest_entry(table.io)
                if entry.status == added and entry.snapshot_id == snapshot.snapshot_id
            ]
            splits += _splits(table, snapshot.snapshot_id, sorted(paths))
        return splits


def _current_id(table: Any) -> int | None:
    snapshot = table.current_snapshot()
    return snapshot.snapshot_id if snapshot is not None else None


def _splits(table: Any, snapshot_id: int, paths: list[str]) -> list[dict[str, Any]]:
    """JSON splits: a data file, the snapshot it is read in, the metadata naming it."""
    metadata = table.metadata_location
    return [{"file": path, "snapshot": snapshot_id, "metadata": metadata} for path in paths]


def iceberg_source(
    table: str,
    catalog: dict[str, Any] | str | None = None,
    warehouse: str | None = None,
    snapshot_id: int | None = None,
    unbounded: bool = False,
    batch_size: int = 65536,
    catalog_name: str = tables.EMBEDDED_CATALOG,
) -> IcebergSource | IcebergStreamSource:
    """The registered ``iceberg`` source: bounded or unbounded, as ``from_iceberg`` asks."""
    kind = IcebergStreamSource if unbounded else IcebergSource
    return kind(table, catalog, warehouse, snapshot_id, batch_size, catalog_name)


@hookimpl
def flintlock_register_sources(register: Callable[[str, Any], None]) -> None:
    register("iceberg", iceberg_source)
