"""An Iceberg data file's statistics, computed where the file is written (the Spark task,
from the Parquet footer its writer just made) and carried to the committer as JSON, so
that a commit does not open every data file again to read its footer (pyiceberg's
``add_files`` does: one read per file per commit, a network round trip on object stores).

The committer builds each ``DataFile`` from these statistics, exactly as ``add_files``
builds it from the footer (the same pyiceberg functions compute them); a file whose
statistics are missing, or were computed for another schema or partition spec than the
table's current ones, is read as ``add_files`` reads it.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pyarrow.parquet as pq

from flintlock.sinks import iceberg_tables as tables

_JSON_VALUES = (int, float, str, bool, type(None))


class _DataFile(TypedDict):
    path: str
    rows: int


class IcebergDataFile(_DataFile, total=False):
    """An IcebergSink committable: a data file (its full location) and its rows; its size
    in ``bytes`` and its footer's ``stats`` once closed (without them the committer reads
    the file, as for committables of checkpoints written before they were recorded)."""

    bytes: int
    stats: dict[str, Any]


def file_statistics(metadata: pq.FileMetaData, model: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON statistics of a data file written for ``model`` (the sink's resolved
    table); None if its partition values are not plain JSON values (then the committer
    reads the file's footer)."""
    arrow_io = tables.pyiceberg("pyiceberg.io.pyarrow")
    schema, spec = model["schema"], model["spec"]
    statistics = arrow_io.data_file_statistics_from_parquet_metadata(
        parquet_metadata=metadata,
        stats_columns=arrow_io.compute_statistics_plan(schema, model["properties"]),
        parquet_column_mapping=arrow_io.parquet_path_to_id_mapping(schema),
    )
    partition = list(statistics.partition(spec, schema))
    if not all(isinstance(value, _JSON_VALUES) for value in partition):
        return None
    serialized = statistics.to_serialized_dict()
    counts = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
    return {
        "schema_id": schema.schema_id,
        "spec_id": spec.spec_id,
        "partition": partition,
        "record_count": serialized["record_count"],
        **{name: {str(k): v for k, v in serialized[name].items()} for name in counts},
        **{
            name: {str(k): v.hex() for k, v in serialized[name].items()}
            for name in ("lower_bounds", "upper_bounds")
        },
        "split_offsets": serialized["split_offsets"],
    }


def data_file(file: IcebergDataFile, metadata: Any, io: Any) -> Any:
    """The ``DataFile`` for a committable ``file`` of a table with ``metadata``: from its
    statistics when they were computed for the table's current schema and spec, else
    from its footer (read now through ``io``)."""
    stats = file.get("stats")
    if (
        stats is None
        or stats["schema_id"] != metadata.current_schema_id
        or stats["spec_id"] != metadata.default_spec_id
    ):
        arrow_io = tables.pyiceberg("pyiceberg.io.pyarrow")
        return arrow_io.parquet_file_to_data_file(io, metadata, file["path"])
    manifest = tables.pyiceberg("pyiceberg.manifest")
    typedef = tables.pyiceberg("pyiceberg.typedef")
    counts = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
    return manifest.DataFile.from_args(
        content=manifest.DataFileContent.DATA,
        file_path=file["path"],
        file_format=manifest.FileFormat.PARQUET,
        partition=typedef.Record(*stats["partition"]),
        file_size_in_bytes=file["bytes"],
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        record_count=stats["record_count"],
        **{name: {int(k): v for k, v in stats[name].items()} for name in counts},
        **{
            name: {int(k): bytes.fromhex(v) for k, v in stats[name].items()}
            for name in ("lower_bounds", "upper_bounds")
        },
        split_offsets=stats["split_offsets"],
    )


def append_files(transaction: Any, table: Any, files: list[IcebergDataFile], summary: Any) -> None:
    """Append ``files`` in ``transaction`` as one snapshot carrying ``summary``, as
    pyiceberg's ``add_files`` appends (a name mapping set first if the table has none;
    a merge append where the table asks for manifest merging)."""
    table_module = tables.pyiceberg("pyiceberg.table")
    metadata = transaction.table_metadata
    if metadata.name_mapping() is None:
        mapping = metadata.schema().name_mapping.model_dump_json()
        transaction.set_properties(**{table_module.TableProperties.DEFAULT_NAME_MAPPING: mapping})
    data_files = [data_file(file, metadata, table.io) for file in files]
    properties = table_module.TableProperties
    merging = metadata.properties.get(
        properties.MANIFEST_MERGE_ENABLED, str(properties.MANIFEST_MERGE_ENABLED_DEFAULT)
    )
    update = transaction.update_snapshot(snapshot_properties=summary)
    producer = update.merge_append() if str(merging).lower() == "true" else update.fast_append()
    with producer as append:
        for one in data_files:
            append.append_data_file(one)
