"""What the Iceberg sink and source share: the catalog given as plain properties, the
table's schema and partitioning as Arrow sees them, and the commit record flintlock
keeps in each snapshot summary (as Flink's Iceberg committer keeps its job id and max
committed checkpoint id there)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa

from flintlock.sinks.optional import require

CatalogSpec = tuple[str, dict[str, str]]
"""A pyiceberg catalog as its name and properties: plain strings, so sinks and sources
that carry one pickle small and open the catalog only where they need it."""

JOB_ID = "flintlock.job-id"
"""Snapshot summary: ``<job id>/<sink uid>`` of the flintlock sink that committed it."""
CHECKPOINT_ID = "flintlock.max-committed-checkpoint-id"
"""Snapshot summary: the newest checkpoint of that sink whose files are in the table."""
RUN_ID = "flintlock.run-id"
JOB_NAME = "flintlock.job-name"


def pyiceberg(module: str = "pyiceberg", who: str = "IcebergSink") -> Any:
    """Import a pyiceberg module, or say which flintlock extra installs it."""
    return require(module, "iceberg", who)


EMBEDDED_CATALOG = "flintlock"
"""The name of the embedded catalog (``warehouse=``) unless ``catalog_name`` gives another:
pyiceberg's SQL catalog keeps it in catalog.db, so a reader loads it by the same name."""


def catalog_spec(
    catalog: dict[str, Any] | str | None,
    warehouse: str | None,
    who: str,
    catalog_name: str = EMBEDDED_CATALOG,
) -> CatalogSpec:
    """The catalog to open: ``catalog``'s properties (an optional ``"name"`` key names it),
    a catalog name from the user's pyiceberg configuration, or — with only ``warehouse``
    — the embedded default: a SQL catalog named ``catalog_name`` on
    ``<warehouse>/catalog.db`` (SQLite) whose tables live under ``<warehouse>``."""
    if catalog is None:
        if warehouse is None:
            raise ValueError(
                f"{who} needs catalog= (a pyiceberg catalog's properties, e.g. "
                f'{{"type": "rest", "uri": ...}}) or warehouse= (a folder: the embedded '
                f"SQL catalog lives in <warehouse>/catalog.db, the tables under it)"
            )
        if not isinstance(catalog_name, str) or not catalog_name:
            raise ValueError(f"{who}: catalog_name must be a non-empty string")
        folder = os.path.abspath(warehouse.removeprefix("file://"))
        return catalog_name, {
            "type": "sql",
            "uri": f"sqlite:///{folder}/catalog.db",
            "warehouse": f"file://{folder}",
        }
    if warehouse is not None:
        raise ValueError(f"{who}: give catalog= or warehouse=, not both")
    if isinstance(catalog, str):
        return catalog, {}
    if not isinstance(catalog, dict):
        raise ValueError(f"{who}: catalog must be a dict of properties or a name, not {catalog!r}")
    properties = {str(k): str(v) for k, v in catalog.items()}
    return properties.pop("name", "default"), properties


def load_catalog(spec: CatalogSpec, who: str) -> Any:
    """Open the catalog (creating the folder of a SQLite file it names)."""
    name, properties = spec
    uri = properties.get("uri", "")
    if uri.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(uri.removeprefix("sqlite:///")) or ".", exist_ok=True)
    return pyiceberg("pyiceberg.catalog", who).load_catalog(name, **properties)


def split_identifier(table: str, who: str) -> tuple[str, str]:
    """``"namespace.name"`` as (namespace, name); the namespace may hold dots."""
    if not isinstance(table, str) or "." not in table.strip("."):
        raise ValueError(f"{who}: table {table!r} must be 'namespace.name'")
    namespace, _, name = table.rpartition(".")
    return namespace, name


def describe(spec: CatalogSpec) -> str:
    """The catalog as errors name it (its name and URI, never its credentials)."""
    name, properties = spec
    where = properties.get("uri") or properties.get("warehouse")
    return f"catalog '{name}'" + (f" ({where})" if where else "")


def last_commit(table: Any, owner: str) -> dict[str, Any] | None:
    """The newest commit record of ``owner`` (``<job id>/<sink uid>``) among the current
    snapshot and its ancestors, newest first: ``{"checkpoint_id", "run_id", "snapshot_id"}``."""
    ancestors_of = pyiceberg("pyiceberg.table.snapshots").ancestors_of
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        summary = snapshot.summary
        if summary is not None and summary.get(JOB_ID) == owner:
            return {
                "checkpoint_id": int(summary.get(CHECKPOINT_ID, "0")),
                "run_id": summary.get(RUN_ID, ""),
                "snapshot_id": snapshot.snapshot_id,
            }
    return None


def arrow_schema(schema: Any) -> pa.Schema:
    """An Iceberg schema as the Arrow schema of its rows (no field-id metadata; string,
    binary and list types, not their large variants, as pyiceberg's scans return them)."""
    converted = pyiceberg("pyiceberg.io.pyarrow").schema_to_pyarrow(schema, include_field_ids=False)
    return pa.schema([_small(field) for field in converted])


def _small(field: pa.Field) -> pa.Field:
    kind = field.type
    if pa.types.is_large_string(kind):
        kind = pa.string()
    elif pa.types.is_large_binary(kind):
        kind = pa.binary()
    elif pa.types.is_large_list(kind) or pa.types.is_list(kind):
        kind = pa.list_(_small(kind.value_field))
    elif pa.types.is_struct(kind):
        kind = pa.struct([_small(kind.field(i)) for i in range(kind.num_fields)])
    elif pa.types.is_map(kind):
        kind = pa.map_(_small(kind.key_field), _small(kind.item_field))
    return pa.field(field.name, kind, field.nullable)


def schema_misfit(batch_schema: pa.Schema, table_schema: Any) -> list[str]:
    """Why rows of ``batch_schema`` cannot go into a table of ``table_schema`` (Iceberg),
    one phrase per column; empty if they fit (columns matched by name, types equal or
    promotable, required table columns present)."""
    convert = pyiceberg("pyiceberg.io.pyarrow")
    promote = pyiceberg("pyiceberg.schema").promote
    mapping = table_schema.name_mapping
    names = {field.name for field in table_schema.fields}
    problems = []
    for field in batch_schema:
        if field.name not in names:
            problems.append(f"column '{field.name}' is not in the table")
            continue
        wanted = table_schema.find_field(field.name)
        try:
            given = convert.pyarrow_to_schema(pa.schema([field]), name_mapping=mapping)
            given_type = given.find_field(field.name).field_type
            if given_type != wanted.field_type:
                promote(given_type, wanted.field_type)
        except Exception:
            problems.append(
                f"column '{field.name}' is {field.type}, the table's is {wanted.field_type}"
            )
    given_names = set(batch_schema.names)
    problems += [
        f"required column '{field.name}' is missing"
        for field in table_schema.fields
        if field.required and field.name not in given_names
    ]
    return problems


def file_schema(table_schema: Any) -> pa.Schema:
    """The Parquet schema data files are written with: every column of the table, in its
    order, with its Iceberg field id (string and binary columns as their small Arrow
    types, as streams carry them)."""
    fields = []
    for field in pyiceberg("pyiceberg.io.pyarrow").schema_to_pyarrow(table_schema):
        kind = field.type
        if pa.types.is_large_string(kind):
            kind = pa.string()
        elif pa.types.is_large_binary(kind):
            kind = pa.binary()
        fields.append(pa.field(field.name, kind, field.nullable, field.metadata))
    return pa.schema(fields)


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """A fitting batch as rows of ``target``: columns cast where the Arrow type differs,
    optional columns the batch lacks filled with nulls; ValueError on a null in a
    required column."""
    if batch.schema == target:
        return batch
    columns = []
    for field in target:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            columns.append(pa.nulls(batch.num_rows, field.type))
        else:
            column = batch.column(index)
            if not field.nullable and column.null_count:
                raise ValueError(f"column '{field.name}' is required and holds nulls")
            columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=target)


def check_partitioning(spec: Any, schema: Any) -> list[str]:
    """Partition fields flintlock cannot split rows by (their transform needs
    pyiceberg-core, or their source column is nested); empty if it can."""
    problems = []
    for field in spec.fields:
        source = schema.find_field(field.source_id)
        if schema.find_column_name(field.source_id) != source.name:
            problems.append(f"{field.name} (its column {source.name} is nested)")
            continue
        kind = pyiceberg("pyiceberg.io.pyarrow").schema_to_pyarrow(source.field_type)
        try:
            field.transform.pyarrow_transform(source.field_type)(pa.array([], kind))
        except Exception as error:
            problems.append(f"{field.name} = {field.transform}({source.name}) ({error})")
    return problems


def split_by_partition(batch: pa.RecordBatch, spec: Any, schema: Any) -> list[tuple[Any, Any]]:
    """The batch's rows grouped by partition value: ``[(key, rows)]``, one per value (an
    Iceberg data file holds one partition). Vectorised: group_by, then take."""
    if spec.is_unpartitioned():
        return [((), batch)]
    columns = {}
    for index, field in enumerate(spec.fields):
        source = schema.find_field(field.source_id)
        column = batch.column(source.name)
        columns[f"p{index}"] = field.transform.pyarrow_transform(source.field_type)(column)
    keys = list(columns)
    columns["row"] = pa.array(np.arange(batch.num_rows, dtype=np.int64))
    groups = pa.table(columns).group_by(keys, use_threads=False).aggregate([("row", "list")])
    values = [groups.column(key).to_pylist() for key in keys]
    rows = groups.column("row_list")
    return [
        (tuple(value[g] for value in values), batch.take(rows[g].values))
        for g in range(groups.num_rows)
    ]
