"""PostgresSink: rows written exactly once into a PostgreSQL table, a checkpoint at a time.

Each subtask writes a checkpoint's rows in one database transaction (COPY of pyarrow's CSV,
per batch) into a staging table of its own, named after the transaction's id
``flintlock:<job id>:<sink>:<checkpoint>:<subtask>:<run id>:<attempt id>`` (which its
comment holds), and commits it in ``pre_commit``: staged rows are durable and no reader
of the target table sees them. The committer on the driver publishes a completed
checkpoint in ONE transaction: the staged rows of the acknowledged attempts go into the
table, each gets its row in a bookkeeping table (``flintlock_commits``), their staging
tables are dropped; a reader sees all of a checkpoint or none of it, and a repeated
commit finds the bookkeeping rows and does nothing (a committable with neither staging
table nor bookkeeping row is lost data, an error). Every start, and the end of every
commit, drops this job's staging tables that no completed checkpoint references (failed
attempts, epochs that never completed). ``visibility="subtask"`` trades the whole
checkpoint for one copy of the rows: each subtask prepares its own transaction on the table
and the driver commits them one by one (postgres_prepared.py); transactions prepared by
earlier versions are committed or rolled back the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flintlock import SinkOutputError, TwoPhaseCommitSink, hookimpl
from flintlock.plugin_api import CommitContext, OutputCheckContext, SinkWriterContext
from flintlock.sinks import postgres_prepared as pgprep
from flintlock.sinks import postgres_publish as publish
from flintlock.sinks import postgres_sql as pgsql
from flintlock.sinks.optional import require
from flintlock.sinks.postgres_sql import StagedTransaction, psycopg, sql

WRITES = ("insert", "upsert")
MODES = ("error", "append", "overwrite")


@dataclass
class _Transaction:
    connection: Any
    gid: str
    context: SinkWriterContext
    checkpoint_id: int
    schema: pa.Schema | None = None
    stage: str | None = None
    rows: int = 0
    prepared: bool = False
    """Per-subtask visibility: the rows go into the table in a transaction to prepare."""


class PostgresSink(TwoPhaseCommitSink[_Transaction, StagedTransaction]):
    """Writes a stream's rows into the PostgreSQL table ``table`` (``"schema.table"``
    allowed; names are taken literally) of the server ``conninfo`` (libpq key=value or URI).

    ``write="insert"`` adds every row; ``write="upsert"`` inserts or updates by
    ``key_columns`` (per key, the row written last in a checkpoint wins; route each key to
    one subtask, e.g. ``key_by`` the key columns: across subtasks the highest subtask's
    row wins, as the driver's one transaction moves them in that order). A missing table
    is created from the rows' Arrow schema (keys as primary key), an existing one checked
    against it: on the driver before Spark starts when the stream's schema is known
    (``schema``, else the stream's), as is the server's reachability; ``schema`` also has
    the driver create a missing table then. Readers see whole checkpoints only (by
    default): the driver publishes each in one transaction. ``mode``: ``"append"``
    (default: a table is long-lived, shared output that runs and other writers add to,
    and the bookkeeping table already keeps each row once across retries and restarts),
    ``"error"`` refuses a new run when the table holds rows, ``"overwrite"`` (insert
    only) deletes the table's rows in the transaction of the run's first checkpoint (a
    reader never sees the table empty). ``visibility="subtask"`` (the server must allow prepared
    transactions) writes the rows once, straight into the table, and the driver commits
    each subtask's transaction on its own: faster, but a reader may see part of a
    checkpoint (and, with ``"overwrite"``, the table empty), and two subtasks writing one
    key wait on each other's row lock until ``lock_timeout``.
    """

    name = "postgres"

    def __init__(
        self,
        conninfo: str,
        table: str,
        *,
        write: str = "insert",
        key_columns: Sequence[str] = (),
        mode: str = "append",
        schema: pa.Schema | None = None,
        markers_table: str = "flintlock_commits",
        lock_timeout: str = "60s",
        visibility: str = "checkpoint",
    ) -> None:
        if write not in WRITES:
            raise SinkOutputError(f"PostgresSink write={write!r} is not one of {WRITES}")
        if mode not in MODES:
            raise SinkOutputError(f"PostgresSink mode={mode!r} is not one of {MODES}")
        if visibility not in pgprep.VISIBILITIES:
            raise SinkOutputError(
                f"PostgresSink visibility={visibility!r} is not one of {pgprep.VISIBILITIES}"
            )
        if (write == "upsert") != bool(key_columns):
            raise SinkOutputError(
                "PostgresSink: write='upsert' needs key_columns, and only upsert takes them"
            )
        if write == "upsert" and mode == "overwrite":
            raise SinkOutputError(
                "PostgresSink: mode='overwrite' works with write='insert' only (an upsert "
                "already replaces rows by key)"
            )
        if schema is not None:
            missing = [key for key in key_columns if key not in schema.names]
            if missing:
                raise SinkOutputError(f"PostgresSink: key columns {missing} are not in {schema}")
            for field in schema:
                pgsql.pg_type(field.type, field.name)
        require("psycopg", "postgres", "PostgresSink")  # no extra: one clear error now
        self.conninfo = conninfo
        self.table = table
        self.write_mode = write
        self.key_columns = list(key_columns)
        self.mode = mode
        self.schema = schema
        self.markers_table = markers_table
        self.lock_timeout = lock_timeout
        self.visibility = visibility

    # ---- writer side (tasks) ----

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> _Transaction:
        task = context.task
        gid = pgsql.make_gid(
            task.job_id, context.sink_uid, checkpoint_id, task.subtask_index, task.run_id,
            task.attempt_id,
        )  # fmt: skip
        who = self._who(context.sink_uid, task.job_name, checkpoint_id, gid)
        per_subtask = self.visibility == "subtask"
        connection = pgsql.connect(self.conninfo, per_subtask, who)
        if per_subtask:
            same = pgsql.gid_prefix(task.job_id, context.sink_uid)
            pgprep.begin(connection, gid, f"{same}{checkpoint_id}:{task.subtask_index}:")
        connection.execute(
            sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(self.lock_timeout))
        )
        return _Transaction(connection, gid, context, checkpoint_id, prepared=per_subtask)

    def write(self, transaction: _Transaction, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if transaction.schema is not None and batch.schema != transaction.schema:
            raise SinkOutputError(
                f"{self._writer_who(transaction)}: batch schema {batch.schema} differs from "
                f"the transaction's {transaction.schema}"
            )
        try:
            if transaction.schema is None:
                self._start_writing(transaction, batch.schema)
            statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
                pgsql.table_name(transaction.stage or self.table),
                sql.SQL(", ").join(map(sql.Identifier, batch.schema.names)),
            )
            with transaction.connection.cursor().copy(statement) as copy:
                copy.write(pgsql.csv_of(batch))
        except psycopg.Error as error:
            raise self._failed(transaction, "COPY", error) from error
        transaction.rows += batch.num_rows

    def _start_writing(self, transaction: _Transaction, schema: pa.Schema) -> None:
        """At the first rows: the table made or checked; the staging table made (per
        subtask, only an upsert's, dropped in the same transaction)."""
        who = self._writer_who(transaction)
        if self.schema is not None and schema != self.schema:
            raise SinkOutputError(
                f"{who}: the rows' schema {schema} is not the sink's {self.schema}"
            )
        connection = transaction.connection
        if pgsql.columns_of(connection, self.markers_table) and pgsql.columns_of(
            connection, self.table
        ):
            pgsql.check_table(connection, self.table, schema, self.key_columns, who)
        else:  # created outside the transaction, which would hold the catalog till commit
            with pgsql.connect(self.conninfo, True, who) as side:
                pgsql.ensure_markers_table(side, self.markers_table)
                pgsql.create_or_check_table(side, self.table, schema, self.key_columns, who)
        transaction.schema = schema
        if transaction.prepared and self.write_mode == "insert":
            return  # COPY straight into the table
        transaction.stage = pgsql.stage_table(self.table, transaction.gid)
        pgsql.create_stage(
            connection, transaction.stage, self.table, schema.names, transaction.gid,
            ordered=self.write_mode == "upsert",
        )  # fmt: skip

    def pre_commit(self, transaction: _Transaction) -> list[StagedTransaction]:
        """Commit the staging table: durable, invisible to the target table's readers (per
        subtask: prepare the transaction on the table, with its bookkeeping row)."""
        connection, task = transaction.connection, transaction.context.task
        if transaction.rows == 0:  # nothing to commit: no staging table either
            connection.close()  # rolls the open transaction back
            return []
        step = "PREPARE TRANSACTION" if transaction.prepared else "COMMIT of the staged rows"
        try:
            if transaction.prepared:
                self._prepare(transaction)
            else:
                connection.commit()
        except psycopg.Error as error:
            raise self._failed(transaction, step, error) from error
        connection.close()  # a prepared transaction lives on without its connection
        committable: StagedTransaction = {
            "gid": transaction.gid,
            "subtask": task.subtask_index,
            "attempt": task.attempt_id,
            "rows": transaction.rows,
        }
        if transaction.prepared:
            committable["prepared"] = True
        return [committable]

    def _prepare(self, transaction: _Transaction) -> None:
        """Per subtask: an upsert's staged rows into the table, the bookkeeping row, PREPARE."""
        connection, task = transaction.connection, transaction.context.task
        if transaction.stage is not None:
            if transaction.schema is None:  # a stage is made with the first batch's schema
                raise SinkOutputError(f"PostgresSink: {self.table}: a stage without a schema")
            names = transaction.schema.names
            connection.execute(
                pgsql.upsert_statement(self.table, transaction.stage, names, self.key_columns)
            )
            pgsql.drop_stages(connection, [transaction.stage])
        pgsql.insert_marker(
            connection, self.markers_table, task.job_id, transaction.context.sink_uid,
            transaction.checkpoint_id, task.subtask_index, task.run_id, task.attempt_id,
            transaction.gid, transaction.rows,
        )  # fmt: skip
        connection.tpc_prepare()

    def abort(self, transaction: _Transaction) -> None:
        connection = transaction.connection
        if not connection.closed:
            connection.close()  # an open transaction is rolled back with its connection
            return
        if transaction.prepared:
            pgprep.roll_back(self.conninfo, transaction.gid, self._writer_who(transaction))
            return
        if transaction.stage is None:  # no rows: nothing was staged
            return
        with pgsql.connect(self.conninfo, True, self._writer_who(transaction)) as fresh:
            pgsql.drop_stages(fresh, [transaction.stage])

    def _failed(self, transaction: _Transaction, step: str, error: Exception) -> Exception:
        hint = pgprep.hint(error)
        if isinstance(error, psycopg.errors.LockNotAvailable) and transaction.prepared:
            hint = (
                f": another transaction held a lock for lock_timeout={self.lock_timeout} — "
                f"another subtask's prepared transaction writing the same key? Route each "
                f"key to one subtask (key_by the key columns)"
            )
        elif isinstance(error, psycopg.errors.LockNotAvailable):  # staging reads the shape
            hint = (
                f": another transaction held a lock on table {self.table} for "
                f"lock_timeout={self.lock_timeout} (LOCK TABLE, ALTER TABLE or TRUNCATE by "
                f"another program?)"
            )
        return SinkOutputError(
            f"{self._writer_who(transaction)}: {step} failed: {str(error).strip()}{hint}"
        )

    def _writer_who(self, transaction: _Transaction) -> str:
        context = transaction.context
        return self._who(
            context.sink_uid, context.task.job_name, transaction.checkpoint_id, transaction.gid
        )

    def _who(self, sink_uid: str, job_name: str, checkpoint_id: int, gid: str = "") -> str:
        described = f"PostgresSink '{sink_uid}' of job '{job_name}' (table {self.table}"
        described += f", checkpoint {checkpoint_id}" if checkpoint_id else ""
        return described + (f", transaction {gid})" if gid else ")")

    # ---- committer side (driver) ----

    @contextmanager
    def _connect(self, who: str, check_table: bool = False) -> Iterator[Any]:
        """The driver's connection, the server checked, the bookkeeping table made (with
        ``check_table`` and a ``schema``, the table too); a database error names them."""
        with pgsql.connect(self.conninfo, True, who) as connection:
            try:
                pgsql.ensure_markers_table(connection, self.markers_table)
                if check_table and self.schema is not None:
                    pgsql.create_or_check_table(
                        connection, self.table, self.schema, self.key_columns, who
                    )
                yield connection
            except psycopg.Error as error:
                raise SinkOutputError(
                    f"{who}: {type(error).__name__}: {str(error).strip()} (server "
                    f"'{pgsql.redacted(self.conninfo)}', bookkeeping table {self.markers_table})"
                ) from error

    def _committer_who(self, context: CommitContext) -> str:
        return self._who(context.sink_uid, context.job_name, context.checkpoint_id)

    def check_output(self, context: OutputCheckContext) -> None:
        """Before Spark starts, one connection: the server reachable, the bookkeeping
        table made; the table made from
        ``schema``, or, if it exists, checked against the stream (``schema``, else the
        stream's ``input_schema``)."""
        who = self._who(context.sink_uid, context.job_name, 0)
        stream = self.schema if self.schema is not None else self.input_schema
        if stream is not None:
            pgsql.check_stream(stream, self.key_columns, who)
        with self._connect(who, check_table=True) as connection:
            if self.visibility == "subtask":
                pgprep.require_enabled(connection, who)
            if (
                self.schema is None
                and stream is not None
                and pgsql.columns_of(connection, self.table)
            ):
                pgsql.check_table(connection, self.table, stream, self.key_columns, who)

    def prepare_output(self, context: CommitContext) -> None:
        """mode='error' refuses a table holding rows, mode='overwrite' books the deletion
        of its rows at this run's first commit; mode='append' needs no connection here
        (``check_output`` checked the server and the table before Spark started)."""
        if self.mode == "append":
            return
        with self._connect(self._committer_who(context)) as connection:
            if self.mode == "error" and pgsql.columns_of(connection, self.table):
                query = sql.SQL("SELECT EXISTS (SELECT FROM {})").format(
                    pgsql.table_name(self.table)
                )
                if connection.execute(query).fetchone()[0]:
                    raise SinkOutputError(
                        f"the table {self.table} at '{pgsql.redacted(self.conninfo)}' already "
                        f"holds rows: job '{context.job_name}' will not write there with "
                        f"mode='error'. Use PostgresSink(..., mode='append') to add to it, "
                        f"mode='overwrite' to replace its rows, or another table"
                    )
            if self.mode == "overwrite":
                pgsql.insert_marker(
                    connection, self.markers_table, context.job_id, context.sink_uid,
                    context.checkpoint_id, -1, context.run_id, 0, publish.overwrite_gid(context), 0,
                )  # fmt: skip

    def commit(self, context: CommitContext, committables: list[StagedTransaction]) -> None:
        """Publish the checkpoint in ONE transaction (postgres_publish.py), so a reader
        sees all of its rows or none; a repeated commit finds the bookkeeping rows.
        Prepared transactions (``visibility="subtask"``) are committed after it, one by
        one, so that its overwrite deletes none of their rows."""
        if not committables and self.mode != "overwrite":
            return
        with self._connect(self._committer_who(context)) as connection:
            prefix = pgsql.gid_prefix(context.job_id, context.sink_uid)
            gids = {committable["gid"] for committable in committables}
            ready = {x.gtrid: x for x in pgsql.prepared(connection, prefix) if x.gtrid in gids}
            with connection.transaction():
                staged = [c for c in committables if c["gid"] not in ready]
                publish.publish(self, connection, context, staged)
            for committable in sorted(committables, key=lambda c: c["subtask"]):
                if committable["gid"] in ready:  # its bookkeeping row commits with it
                    self._commit_prepared(connection, ready[committable["gid"]])

    def _commit_prepared(self, connection: Any, xid: Any) -> None:
        """COMMIT PREPARED one subtask's transaction: its rows become visible."""
        connection.tpc_commit(xid)

    def abort_uncommitted(self, context: CommitContext, keep: list[StagedTransaction]) -> None:
        """At every start and after every commit: drop this job's staging tables that no
        completed checkpoint references (``keep``): failed attempts, epochs that never
        completed. Prepared transactions (``visibility="subtask"``, or an earlier
        flintlock's) are committed when ``keep`` references them, else rolled back, so
        none holds its locks for ever."""
        kept = {committable["gid"] for committable in keep}
        with self._connect(self._committer_who(context), check_table=True) as connection:
            prefix = pgsql.gid_prefix(context.job_id, context.sink_uid)
            for xid in pgsql.prepared(connection, prefix):
                if xid.gtrid in kept:
                    connection.tpc_commit(xid)
                else:
                    connection.tpc_rollback(xid)
            stages = pgsql.staged(connection, prefix)
            pgsql.drop_stages(connection, [t for gid, t in stages.items() if gid not in kept])


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("postgres", PostgresSink)
