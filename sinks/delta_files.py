"""The DeltaSink's data files: Delta-typed Arrow schemas, the fit of a stream to a table,
partition folders and the Parquet statistics an ``add`` action carries.

Shared by the writer (in tasks), the committer (on the driver) and the delta source.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from typing import Any, TypedDict
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flintlock import CommittableError
from flintlock.plugin_api import CommitContext, list_folder
from flintlock.sinks.optional import require

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The folder name of a null partition value (Hive's, as Spark and delta-rs write it)."""


class _DataFile(TypedDict):
    path: str
    size: int
    rows: int
    partition_values: dict[str, str | None]
    stats: dict[str, Any]
    modification_time: int


class DeltaDataFile(_DataFile, total=False):
    """A DeltaSink committable: a data file as the committer's ``add`` action needs it
    (``path`` relative to the table); with the table's ``schema`` (Delta JSON) and
    ``partition_by`` when it was written while the table did not exist yet."""

    schema: str
    partition_by: list[str]


def deltalake() -> Any:
    """The deltalake module, or a PluginError naming the ``delta`` extra."""
    return require("deltalake", "delta", "the Delta Lake connector")


def delta_typed(schema: pa.Schema) -> pa.Schema:
    """``schema`` as a Delta table stores it (e.g. uint32 -> int32, large_string -> string):
    the schema of a table created from it, and what written batches are cast to."""
    micros = pa.schema([_in_micros(field) for field in schema], metadata=schema.metadata)
    return pa.schema(deltalake().Schema.from_arrow(micros).to_arrow())


def _in_micros(field: pa.Field) -> pa.Field:
    """Nanosecond timestamps as microseconds, as Spark and Delta keep them (a nanosecond
    table needs a reader feature delta-rs itself cannot read)."""
    if pa.types.is_timestamp(field.type) and field.type.unit == "ns":
        return field.with_type(pa.timestamp("us", field.type.tz))
    return field


def schema_differences(
    stream: pa.Schema, table: pa.Schema, ours: str = "the stream", theirs: str = "the table"
) -> list[str]:
    """How ``stream`` does not fit ``table`` (by column name and Delta type; nullability and
    column order are free), one phrase per column; empty if it fits."""
    mine = {field.name: field.type for field in delta_typed(stream)}
    other = {field.name: field.type for field in table}
    differences = [f"column '{name}' is missing from {ours}" for name in other.keys() - mine]
    differences += [f"column '{name}' is not in {theirs}" for name in mine.keys() - other]
    differences += [
        f"column '{name}' is {mine[name]} in {ours}, {other[name]} in {theirs}"
        for name in mine.keys() & other.keys()
        if mine[name] != other[name]
    ]
    return sorted(differences)


def partition_string(value: Any) -> str | None:
    """A partition value as the Delta log writes it (``partitionValues`` are strings)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        raise ValueError("binary partition columns are not supported")
    return str(value)


def partition_folder(values: dict[str, str | None]) -> str:
    """``col=value/...`` for a partition (empty for an unpartitioned table)."""
    return "/".join(
        f"{name}={NULL_PARTITION if value is None else quote(value, safe='')}"
        for name, value in values.items()
    )


def split_by_partition(
    table: pa.Table, partition_by: list[str]
) -> list[tuple[dict[str, str | None], pa.Table]]:
    """The rows of ``table`` per partition value, without the partition columns (Delta
    keeps those in the log, not in the files): sorted once, then sliced per partition."""
    if not partition_by:
        return [({}, table)]
    ordered = table.sort_by([(name, "ascending") for name in partition_by])
    ordered = ordered.append_column("__row", pa.array(range(ordered.num_rows), pa.int64()))
    groups = ordered.group_by(partition_by, use_threads=False).aggregate(
        [("__row", "min"), ("__row", "count")]
    )
    data = ordered.drop_columns([*partition_by, "__row"])
    parts = []
    for group in groups.to_pylist():
        values = {name: partition_string(group[name]) for name in partition_by}
        parts.append((values, data.slice(group["__row_min"], group["__row_count"])))
    return parts


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.Table:
    """``batch`` with the columns of ``target``, in its order and types (a safe cast:
    a value the table's type cannot hold raises instead of changing), as one table."""
    table = pa.Table.from_batches([batch])
    columns = [
        # a timestamp keeps its microseconds (Delta's precision): nanoseconds are dropped
        pc.cast(table.column(field.name), field.type, safe=not pa.types.is_timestamp(field.type))
        for field in target
    ]
    return pa.Table.from_arrays(columns, schema=target)


_STAT_TYPES = (pa.types.is_integer, pa.types.is_string, pa.types.is_date)
"""Types whose Parquet min/max is Delta's too (floats are left out: Parquet's ignore NaN,
which Spark orders above every number, so a reader could skip a file wrongly)."""


def file_stats(path: str, filesystem: Any, schema: pa.Schema) -> dict[str, Any]:
    """``numRecords`` and per column ``minValues``/``maxValues``/``nullCount`` of a closed
    Parquet file, from its footer (min/max only where the Delta JSON form is exact)."""
    metadata = pq.read_metadata(path, filesystem=filesystem)
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for index in range(metadata.num_columns):
        name = metadata.schema.column(index).name
        if name not in schema.names:
            continue  # a nested column's leaf
        chunks = [
            metadata.row_group(g).column(index).statistics for g in range(metadata.num_row_groups)
        ]
        if any(stats is None for stats in chunks):
            continue
        if all(stats.has_null_count for stats in chunks):
            nulls[name] = sum(stats.null_count for stats in chunks)
        bounded = [stats for stats in chunks if stats.has_min_max]
        if not bounded or not any(kind(schema.field(name).type) for kind in _STAT_TYPES):
            continue
        low, high = min(s.min for s in bounded), max(s.max for s in bounded)
        if isinstance(low, datetime.date):
            low, high = low.isoformat(), high.isoformat()
        minimum[name], maximum[name] = low, high
    return {
        "numRecords": metadata.num_rows,
        "minValues": minimum,
        "maxValues": maximum,
        "nullCount": nulls,
    }


def sink_key(sink_uid: str) -> str:
    """A short, file-name-safe stand-in for a sink's uid (injective enough: a hash)."""
    return hashlib.sha1(sink_uid.encode()).hexdigest()[:8]


_REST = re.compile(r"(?P<run>[0-9A-Za-z_]+)-c(?P<chk>\d+)-s\d+-a\d+-\d+\.parquet")


_ANY_SINK = re.compile(r"[0-9A-Za-z_]+-[0-9a-f]{8}-" + _REST.pattern)


def file_prefix(job_id: str, sink_uid: str) -> str:
    """The name every data file of one sink of one job starts with."""
    return f"part-{job_id or 'local'}-{sink_key(sink_uid)}-"


def is_sink_file(path: str) -> bool:
    """True for a data file some DeltaSink wrote (any job's, any sink's)."""
    owner, _, rest = path.rsplit("/", 1)[-1].partition("-")
    return owner == "part" and _ANY_SINK.fullmatch(rest) is not None


def checkpoint_of(base_name: str, prefix: str) -> int | None:
    """The checkpoint id in the name of a data file of ``prefix``'s sink (None: not one)."""
    if not base_name.startswith(prefix):
        return None
    match = _REST.fullmatch(base_name[len(prefix) :])
    return int(match["chk"]) if match else None


def stats_json(stats: dict[str, Any]) -> str:
    """The ``stats`` string of an ``add`` action."""
    return json.dumps(stats, sort_keys=True, default=str)


def verify_file(filesystem: pafs.FileSystem, path: str, file: DeltaDataFile, stuck: str) -> None:
    """Check a committable's data file is the one written (size and rows), else raise
    CommittableError ending in ``stuck``, what the user can do."""
    info = filesystem.get_file_info(path)
    if info.type != pafs.FileType.File:
        raise CommittableError(f"the data file {path} is missing: its rows are lost{stuck}")
    if info.size != file["size"]:
        raise CommittableError(
            f"the data file {path} has {info.size} bytes, {file['size']} were written "
            f"(truncated or changed){stuck}"
        )
    try:
        rows = pq.read_metadata(path, filesystem=filesystem).num_rows
    except (pa.ArrowInvalid, OSError) as error:
        raise CommittableError(f"the data file {path} is damaged: {error}{stuck}") from error
    if rows != file["rows"]:
        raise CommittableError(
            f"the data file {path} holds {rows} rows, {file['rows']} were written{stuck}"
        )


def stuck(context: CommitContext, uri: str) -> str:
    """What the user can do when a checkpoint's data cannot be committed whole."""
    return (
        f". Checkpoint {context.checkpoint_id} of job '{context.job_name}' (sink "
        f"'{context.sink_uid}') cannot be committed to {uri}, and starting again will not "
        f"change that. To recover, run the job anew: execute('{context.job_name}', "
        f"new_run=True) or `flintlock run --new-run`, with DeltaSink(..., mode='append') or "
        f"mode='overwrite'"
    )


def delete_if_exists(filesystem: pafs.FileSystem, path: str) -> None:
    """Delete the file at ``path`` if there is one."""
    if filesystem.get_file_info(path).type == pafs.FileType.File:
        filesystem.delete_file(path)


def list_data_files(filesystem: pafs.FileSystem, root: str) -> list[tuple[str, str]]:
    """Every file in a table's folder but its log: relative path and base name."""
    return [
        (info.path[len(root) + 1 :], info.base_name)
        for info in list_folder(filesystem, root, recursive=True)
        if info.type == pafs.FileType.File
        and not info.path[len(root) + 1 :].startswith("_delta_log/")
    ]


def load_table(uri: str, storage_options: dict[str, str] | None) -> Any | None:
    """The newest version of the Delta table at ``uri``, or None if there is none.

    Opened directly, not through ``DeltaTable.is_deltatable``: that call keeps the GIL
    while it waits for the object store (deltalake 1.6), stopping the driver's other
    threads (the lease's renewal; an S3 server in the same process never answers)."""
    module = deltalake()
    try:
        return module.DeltaTable(uri, storage_options=storage_options)
    except module.exceptions.TableNotFoundError:
        return None


_ARROW_S3_SETTINGS = {
    "endpoint_url": "endpoint_override",
    "endpoint": "endpoint_override",
    "access_key_id": "access_key",
    "secret_access_key": "secret_key",
    "session_token": "session_token",
    "region": "region",
    "default_region": "region",
}
"""delta-rs's S3 storage options (``AWS_`` prefix and case aside) -> pyarrow's
S3FileSystem arguments."""


def arrow_filesystem(
    uri: str, storage_options: dict[str, str] | None
) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system and root path of the table at ``uri``: for an ``s3://``
    table, at the endpoint and with the credentials of ``storage_options`` (the same
    settings delta-rs uses; else pyarrow's defaults, the environment's)."""
    if not uri.startswith(("s3://", "s3a://")) or not storage_options:
        filesystem, root = pafs.FileSystem.from_uri(uri)
        return filesystem, root.rstrip("/")
    settings: dict[str, Any] = {}
    for name, value in storage_options.items():
        key = name.lower().removeprefix("aws_")
        if key in _ARROW_S3_SETTINGS:
            settings[_ARROW_S3_SETTINGS[key]] = value
        elif key == "allow_http" and value.lower() == "true":
            settings.setdefault("scheme", "http")
    endpoint = settings.get("endpoint_override", "")
    if "://" in endpoint:
        scheme, _, settings["endpoint_override"] = endpoint.partition("://")
        settings["scheme"] = scheme
    return pafs.S3FileSystem(**settings), uri.split("://", 1)[1].rstrip("/")
