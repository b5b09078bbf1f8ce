"""PostgresSink's driver side: the ONE transaction that publishes a completed checkpoint.

In it, the staged rows of each acknowledged attempt go into the table (``INSERT ...
SELECT``; upsert: the last row of a key wins), each attempt gets its bookkeeping row, the
staging tables are dropped, an overwrite deletes the table's old rows, and the earlier
checkpoints' bookkeeping rows are forgotten: a reader sees all of the checkpoint or none
of it, and a repeated commit finds the bookkeeping rows and moves nothing again. The
second copy of the rows is the price of that (bench/RESULTS.md, W4 PostgreSQL): profiled,
the ``INSERT ... SELECT`` costs about what the subtasks' COPY cost, and the rest (catalog
look-ups, drops, round trips) a few percent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flintlock import CommittableError
from flintlock.plugin_api import CommitContext
from flintlock.sinks import postgres_sql as pgsql
from flintlock.sinks.postgres_sql import StagedTransaction, sql

if TYPE_CHECKING:
    from flintlock.sinks.postgres import PostgresSink


def publish(
    sink: PostgresSink,
    connection: Any,
    context: CommitContext,
    committables: list[StagedTransaction],
) -> None:
    """Inside the open transaction on ``connection``: publish the ``committables`` that
    have no bookkeeping row yet (the prepared ones are not passed here)."""
    connection.execute(
        sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(sink.lock_timeout))
    )
    done = bookkept(connection, sink.markers_table, [c["gid"] for c in committables])
    todo = sorted((c for c in committables if c["gid"] not in done), key=lambda c: c["subtask"])
    prefix = pgsql.gid_prefix(context.job_id, context.sink_uid)
    stages = pgsql.staged(connection, prefix) if todo else {}
    check_staged(sink, context, todo, stages)  # everything, before any write
    if sink.mode == "overwrite":
        overwrite_once(sink, connection, context)
    for committable in todo:
        move(sink, connection, context, committable, stages[committable["gid"]])
    pgsql.drop_stages(connection, [stages[c["gid"]] for c in todo])
    # commits run in checkpoint order: the earlier checkpoints' rows are done with
    connection.execute(
        sql.SQL(
            "DELETE FROM {} WHERE job_id = %s AND sink_uid = %s AND "
            "checkpoint_id < %s AND subtask >= 0"
        ).format(pgsql.table_name(sink.markers_table)),
        [context.job_id or "local", context.sink_uid, context.checkpoint_id],
    )


def move(
    sink: PostgresSink,
    connection: Any,
    context: CommitContext,
    committable: StagedTransaction,
    stage: str,
) -> None:
    """One attempt's staged rows into the table (upsert: the last row of a key wins),
    with its bookkeeping row."""
    names = [name for name in pgsql.columns_of(connection, stage) if name != "_flintlock_seq"]
    if sink.write_mode == "upsert":
        connection.execute(pgsql.upsert_statement(sink.table, stage, names, sink.key_columns))
    else:
        columns = sql.SQL(", ").join(map(sql.Identifier, names))
        moved = connection.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
                pgsql.table_name(sink.table), columns, columns, pgsql.table_name(stage)
            )
        ).rowcount
        if moved != committable["rows"]:
            raise CommittableError(
                f"the staging table {stage} of transaction {committable['gid']} (subtask "
                f"{committable['subtask']}) holds {moved} rows, its subtask wrote "
                f"{committable['rows']}: changed by hand or by another program. Checkpoint "
                f"{context.checkpoint_id} of job '{context.job_name}' is not committed"
            )
    pgsql.insert_marker(
        connection, sink.markers_table, context.job_id, context.sink_uid,
        context.checkpoint_id, committable["subtask"], context.run_id,
        committable["attempt"], committable["gid"], committable["rows"],
    )  # fmt: skip


def bookkept(connection: Any, markers: str, gids: list[str]) -> set[str]:
    """The transactions among ``gids`` that have their bookkeeping row: committed."""
    return {
        gid
        for (gid,) in connection.execute(
            sql.SQL("SELECT gid FROM {} WHERE gid = ANY(%s)").format(pgsql.table_name(markers)),
            [sorted(gids)],
        )
    }


def check_staged(
    sink: PostgresSink,
    context: CommitContext,
    committables: list[StagedTransaction],
    stages: dict[str, str],
) -> None:
    """Committables neither committed nor prepared: each must have its staging table."""
    for committable in committables:
        gid = committable["gid"]
        if gid in stages:
            continue
        kind, gone = ("staged rows of transaction", "dropped")
        if committable.get("prepared"):
            kind, gone = ("prepared transaction", "rolled back")
        raise CommittableError(
            f"the {kind} {gid} of subtask {committable['subtask']} ({committable['rows']} "
            f"rows for table {sink.table}) is gone and was never committed (not there, no "
            f"row in {sink.markers_table}): {gone} by hand or by another program; its rows "
            f"are lost for good. Checkpoint {context.checkpoint_id} of job "
            f"'{context.job_name}' cannot be committed whole and starting again will not "
            f"change that: run the job anew (execute('{context.job_name}', new_run=True) "
            f"or `flintlock run --new-run`)"
        )


def overwrite_gid(context: CommitContext) -> str:
    """The id of the bookkeeping row that books a run's overwrite."""
    return f"{pgsql.gid_prefix(context.job_id, context.sink_uid)}overwrite:{context.run_id}"


def overwrite_once(sink: PostgresSink, connection: Any, context: CommitContext) -> None:
    """mode='overwrite': at a new run's first commit, delete the rows it did not write —
    once: its bookkeeping row (made by prepare_output) is marked done in the same
    transaction, so a repeated commit, or a later run that only continues the job,
    deletes nothing. Inside the commit's transaction: no reader sees the table empty
    (with ``visibility="subtask"`` the run's rows are committed after it)."""
    with connection.transaction():
        claimed = connection.execute(
            sql.SQL(
                "UPDATE {} SET row_count = 1 WHERE gid = %s AND row_count = 0 RETURNING gid"
            ).format(pgsql.table_name(sink.markers_table)),
            [overwrite_gid(context)],
        ).fetchone()
        if claimed is not None:
            connection.execute(sql.SQL("DELETE FROM {}").format(pgsql.table_name(sink.table)))
