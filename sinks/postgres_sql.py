"""PostgresSink's SQL: Arrow types as PostgreSQL columns, batches as CSV for COPY, the
target table created or checked, the bookkeeping table, transaction ids, connections.

Batches reach PostgreSQL as CSV written by pyarrow (``COPY ... FROM STDIN (FORMAT csv)``):
pyarrow does the per-row work, quotes every string (an empty string stays ``""``) and
leaves nulls unquoted and empty, which is what PostgreSQL's CSV reads as NULL.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.csv as pacsv

from flintlock import PluginError, SinkOutputError
from flintlock.sinks.optional import require


class _Imported:
    """A module imported at its first use, through ``require``: flintlock loads every
    plugin at start, and this one must load without the ``postgres`` extra installed."""

    def __init__(self, module: str) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(require(self.module, "postgres", "PostgresSink"), name)


class StagedTransaction(TypedDict, total=False):
    """A PostgresSink committable: one subtask's transaction (its rows staged, or with
    ``visibility="subtask"`` prepared on the table), as checkpoint metadata keeps it."""

    gid: str
    subtask: int
    attempt: int
    rows: int
    prepared: bool
    """Present (True) for a prepared transaction; absent for staged rows."""


psycopg: Any = _Imported("psycopg")
sql: Any = _Imported("psycopg.sql")

GID_PREFIX = "flintlock"
"""Every prepared transaction of a PostgresSink is named ``flintlock:<job>:<sink>:...``."""

STAGE_PREFIX = "_flintlock_stage_"
"""A subtask's transaction stages its rows in a table of this name (in the target
table's schema, its id in the table's comment) and commits it; the driver moves a
checkpoint's staged rows into the target table in one transaction."""

# ---- types ----


def pg_type(arrow: pa.DataType, column: str) -> str:
    """The PostgreSQL type a column of Arrow type ``arrow`` is created with."""
    if pa.types.is_dictionary(arrow):
        return pg_type(arrow.value_type, column)
    simple = {
        pa.bool_(): "boolean",
        pa.int8(): "smallint",
        pa.int16(): "smallint",
        pa.int32(): "integer",
        pa.int64(): "bigint",
        pa.uint8(): "smallint",
        pa.uint16(): "integer",
        pa.uint32(): "bigint",
        pa.uint64(): "numeric(20)",
        pa.float16(): "real",
        pa.float32(): "real",
        pa.float64(): "double precision",
        pa.string(): "text",
        pa.large_string(): "text",
        pa.date32(): "date",
        pa.date64(): "date",
    }
    if arrow in simple:
        return simple[arrow]
    if pa.types.is_timestamp(arrow):
        return "timestamp with time zone" if arrow.tz else "timestamp without time zone"
    if pa.types.is_time(arrow):
        return "time without time zone"
    if pa.types.is_decimal(arrow):
        return f"numeric({arrow.precision},{arrow.scale})"
    raise SinkOutputError(
        f"PostgresSink cannot write column {column!r} of Arrow type {arrow}: supported are "
        f"booleans, integers, floats, decimals, strings, dates, times and timestamps (cast "
        f"binary, list or struct columns, e.g. to a string, before the sink)"
    )


FAMILIES = {
    "boolean": {"boolean"},
    "smallint": {"smallint", "integer", "bigint", "numeric"},
    "integer": {"integer", "bigint", "numeric"},
    "bigint": {"bigint", "numeric"},
    "numeric": {"numeric"},
    "real": {"real", "double precision", "numeric"},
    "double precision": {"double precision", "numeric"},
    "text": {"text", "character varying", "character", "json", "jsonb"},
    "date": {"date", "timestamp without time zone"},
    "time without time zone": {"time without time zone"},
    "timestamp without time zone": {"timestamp without time zone"},
    "timestamp with time zone": {"timestamp with time zone"},
}
"""The column types of an existing table an Arrow column may be written into."""


def check_stream(schema: pa.Schema, key_columns: Sequence[str], who: str) -> None:
    """A stream's columns: each of a type the sink writes, the key columns among them."""
    missing = [key for key in key_columns if key not in schema.names]
    if missing:
        raise SinkOutputError(
            f"{who}: key columns {missing} are not columns of the stream {schema.names}"
        )
    for field in schema:
        pg_type(field.type, field.name)


def accepts(existing: str, arrow: pa.DataType, column: str) -> bool:
    """Whether a column of PostgreSQL type ``existing`` takes Arrow type ``arrow``."""
    wanted = pg_type(arrow, column).split("(")[0]
    return existing.split("(")[0] in FAMILIES[wanted]


def csv_of(batch: pa.RecordBatch) -> bytes:
    """The batch as headerless CSV for COPY (dictionary columns decoded first)."""
    columns = [
        column.dictionary_decode() if pa.types.is_dictionary(column.type) else column
        for column in batch.columns
    ]
    buffer = io.BytesIO()
    decoded = pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
    pacsv.write_csv(decoded, buffer, pacsv.WriteOptions(include_header=False))
    return buffer.getvalue()


# ---- names ----


def table_name(table: str) -> sql.Composable:
    """``"schema"."table"`` or ``"table"``: names are taken literally (case-sensitive)."""
    return sql.Identifier(*table.split(".", 1))


def table_parts(table: str) -> tuple[str | None, str]:
    """(schema or None, table) of ``schema.table`` or ``table``."""
    schema, _, name = table.rpartition(".")
    return (schema or None), name


def sink_key(sink_uid: str) -> str:
    """A short, ``:``-free stand-in for a sink's uid in transaction ids."""
    return hashlib.sha1(sink_uid.encode()).hexdigest()[:12]


def gid_prefix(job_id: str, sink_uid: str) -> str:
    """The start of every transaction id of one sink of one job."""
    return f"{GID_PREFIX}:{job_id or 'local'}:{sink_key(sink_uid)}:"


def make_gid(
    job_id: str, sink_uid: str, checkpoint_id: int, subtask: int, run_id: str, attempt: int
) -> str:
    """``flintlock:<job>:<sink>:<checkpoint>:<subtask>:<run>:<attempt>`` (under 200 bytes)."""
    gid = f"{gid_prefix(job_id, sink_uid)}{checkpoint_id}:{subtask}:{run_id}:{attempt}"
    assert len(gid.encode()) < 200, gid
    return gid


# ---- connections ----


def redacted(conninfo: str) -> str:
    """The conninfo without its password, for error messages."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "(a conninfo that cannot be parsed)"
    parts.pop("password", None)
    return str(psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in parts.items()}))


def connect(conninfo: str, autocommit: bool, who: str) -> Any:
    """A connection, or an error naming the server (without the password) and ``who``."""
    try:
        return psycopg.connect(conninfo, autocommit=autocommit, connect_timeout=10)
    except psycopg.Error as error:
        raise PluginError(
            f"{who}: cannot connect to PostgreSQL at '{redacted(conninfo)}': {str(error).strip()}"
        ) from error


def prepared(connection: Any, prefix: str) -> list[Any]:
    """This database's prepared transactions (``tpc_recover``) whose id starts with ``prefix``."""
    (database,) = connection.execute("SELECT current_database()").fetchone()
    return [
        xid
        for xid in connection.tpc_recover()
        if xid.database == database and xid.gtrid.startswith(prefix)
    ]


# ---- tables ----


def columns_of(connection: Any, table: str) -> dict[str, tuple[str, bool]]:
    """An existing table's columns: name -> (type, nullable); empty when it is missing."""
    rows = connection.execute(
        "SELECT a.attname, format_type(a.atttypid, NULL), NOT a.attnotnull "
        "FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 "
        "AND NOT a.attisdropped ORDER BY a.attnum",
        [table_name(table).as_string(connection)],
    ).fetchall()
    return {row[0]: (row[1], row[2]) for row in rows}


def create_or_check_table(
    connection: Any, table: str, schema: pa.Schema, key_columns: Sequence[str], who: str
) -> None:
    """Create ``table`` from the Arrow schema (keys as its primary key), or check that the
    existing table takes the schema's columns (and has a unique index on the keys); on an
    autocommit connection outside the sink's transactions, which would hold the catalog."""
    if not columns_of(connection, table):
        with connection.transaction():  # one creator at a time, the others then check
            connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [table])
            columns = [
                sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(pg_type(f.type, f.name)))
                for f in schema
            ]
            if key_columns:
                columns.append(
                    sql.SQL("PRIMARY KEY ({})").format(
                        sql.SQL(", ").join(map(sql.Identifier, key_columns))
                    )
                )
            connection.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
                    table_name(table), sql.SQL(", ").join(columns)
                )
            )
    check_table(connection, table, schema, key_columns, who)


def check_table(
    connection: Any, table: str, schema: pa.Schema, key_columns: Sequence[str], who: str
) -> None:
    """Refuse a table that lacks a column of ``schema``, has an incompatible type, a NOT
    NULL column the rows leave empty, or (upsert) no unique index on the key columns."""
    existing = columns_of(connection, table)
    problems = []
    for field in schema:
        if field.name not in existing:
            problems.append(f"it has no column {field.name!r}")
        elif not accepts(existing[field.name][0], field.type, field.name):
            problems.append(
                f"column {field.name!r} is {existing[field.name][0]}, the rows bring "
                f"{field.type} ({pg_type(field.type, field.name)})"
            )
    for name, (_, nullable) in existing.items():
        if name not in schema.names and not nullable and not _has_default(connection, table, name):
            problems.append(f"its NOT NULL column {name!r} is not in the rows")
    if key_columns and not problems and not _unique_on(connection, table, key_columns):
        problems.append(
            f"upsert needs a primary key or unique index on exactly ({', '.join(key_columns)})"
        )
    if problems:
        raise SinkOutputError(
            f"{who}: the table {table} does not fit the rows {schema.names}: "
            f"{'; '.join(problems)}. Change the table or the stream's schema, or write "
            f"to a new table (the sink creates it)"
        )


def _has_default(connection: Any, table: str, column: str) -> bool:
    row = connection.execute(
        "SELECT atthasdef OR attidentity <> '' FROM pg_attribute "
        "WHERE attrelid = to_regclass(%s) AND attname = %s",
        [table_name(table).as_string(connection), column],
    ).fetchone()
    return bool(row and row[0])


def _unique_on(connection: Any, table: str, key_columns: Sequence[str]) -> bool:
    rows = connection.execute(
        "SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indpred IS NULL "
        "GROUP BY i.indexrelid",
        [table_name(table).as_string(connection)],
    ).fetchall()
    return any(sorted(row[0]) == sorted(key_columns) for row in rows)


def ensure_markers_table(connection: Any, markers: str) -> None:
    """The bookkeeping table: one row per committed transaction, written inside it."""
    if columns_of(connection, markers):
        return
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [markers])
        connection.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (job_id text NOT NULL, sink_uid text NOT NULL, "
                "checkpoint_id bigint NOT NULL, subtask integer NOT NULL, run_id text NOT NULL, "
                "attempt_id bigint NOT NULL, gid text NOT NULL UNIQUE, row_count bigint NOT NULL, "
                "committed_at timestamptz NOT NULL DEFAULT now(), "
                "PRIMARY KEY (job_id, sink_uid, checkpoint_id, subtask))"
            ).format(table_name(markers))
        )


def upsert_statement(
    table: str, stage: str, columns: Sequence[str], key_columns: Sequence[str]
) -> sql.Composable:
    """Move a stage table's rows into ``table``: per key, the row written last wins."""
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    keys = sql.SQL(", ").join(map(sql.Identifier, key_columns))
    others = [c for c in columns if c not in key_columns]
    action = (
        sql.SQL("DO UPDATE SET ")
        + sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in others
        )
        if others
        else sql.SQL("DO NOTHING")
    )
    return sql.SQL(
        "INSERT INTO {table} ({names}) SELECT DISTINCT ON ({keys}) {names} FROM {stage} "
        "ORDER BY {keys}, _flintlock_seq DESC ON CONFLICT ({keys}) {action}"
    ).format(
        table=table_name(table), names=names, keys=keys, stage=table_name(stage), action=action
    )


def insert_marker(
    connection: Any, markers: str, job_id: str, sink_uid: str, checkpoint_id: int,
    subtask: int, run_id: str, attempt_id: int, gid: str, rows: int,
) -> None:  # fmt: skip
    """A bookkeeping row (a transaction's, or subtask -1: an overwrite booked for a run)."""
    connection.execute(
        sql.SQL(
            "INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (gid) DO NOTHING"
        ).format(table_name(markers)),
        [job_id or "local", sink_uid, checkpoint_id, subtask, run_id, attempt_id, gid, rows],
    )


# ---- staging ----


def stage_table(table: str, gid: str) -> str:
    """The staging table of transaction ``gid``, in the target ``table``'s schema."""
    owner, _ = table_parts(table)
    name = STAGE_PREFIX + hashlib.sha1(gid.encode()).hexdigest()[:20]
    return f"{owner}.{name}" if owner else name


def create_stage(
    connection: Any, stage: str, table: str, columns: Sequence[str], gid: str, ordered: bool
) -> None:
    """A logged table for one transaction's rows (it must outlive a server crash until
    its checkpoint is committed), shaped as ``table``'s ``columns``, commented with the
    transaction id (``staged`` finds it by that); ``ordered`` adds the write order that
    an upsert needs (the last row of a key wins)."""
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    connection.execute(
        sql.SQL("CREATE TABLE {} AS SELECT {} FROM {} WITH NO DATA").format(
            table_name(stage), names, table_name(table)
        )
    )
    connection.execute(
        sql.SQL("COMMENT ON TABLE {} IS {}").format(table_name(stage), sql.Literal(gid))
    )
    if ordered:
        connection.execute(
            sql.SQL(
                "ALTER TABLE {} ADD COLUMN _flintlock_seq bigint GENERATED ALWAYS AS IDENTITY"
            ).format(table_name(stage))
        )


def staged(connection: Any, prefix: str) -> dict[str, str]:
    """This database's committed staging tables whose transaction id starts with
    ``prefix``: id -> ``schema.table`` (as ``table_name`` reads it)."""
    rows = connection.execute(
        "SELECT d.description, n.nspname || '.' || c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_description d ON "
        "d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0 "
        "WHERE c.relkind = 'r' AND c.relname LIKE %s AND starts_with(d.description, %s)",
        [STAGE_PREFIX.replace("_", "\\_") + "%", prefix],
    ).fetchall()
    return {gid: table for gid, table in rows}


def drop_stages(connection: Any, tables: Sequence[str]) -> None:
    """Drop staging tables (``schema.table``)."""
    for table in tables:
        connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table_name(table)))
