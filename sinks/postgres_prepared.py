"""PostgresSink's per-subtask visibility (``visibility="subtask"``), by prepared transactions.

Each subtask COPYs a checkpoint's rows straight into the table in one transaction, writes
its bookkeeping row in it and prepares it (PREPARE TRANSACTION) under its id; the driver
runs COMMIT PREPARED per subtask once the checkpoint completed. The rows are written once
(no staging table, no second copy in the driver), but the subtasks' rows of a checkpoint
become visible one COMMIT PREPARED after another, as with Flink's XA sink. PostgreSQL keeps
no record of a committed prepared transaction: the bookkeeping row tells a committed one
from a lost one. The server must allow prepared transactions.
"""

from __future__ import annotations

from typing import Any

from flintlock import SinkOutputError
from flintlock.sinks import postgres_sql as pgsql

VISIBILITIES = ("checkpoint", "subtask")
"""``checkpoint``: readers see whole checkpoints (staging, one publishing transaction);
``subtask``: each subtask's rows of a checkpoint as its prepared transaction commits."""


def require_enabled(connection: Any, who: str) -> None:
    """Refuse a server that cannot prepare transactions (PostgreSQL's default)."""
    (value,) = connection.execute("SHOW max_prepared_transactions").fetchone()
    if int(value) <= 0:
        raise SinkOutputError(
            f"{who}: visibility='subtask' needs a server that allows prepared transactions "
            f"(max_prepared_transactions > 0); it has max_prepared_transactions = {value}. "
            f"Set it in postgresql.conf (at least the sink's parallelism) and restart the "
            f"server, or use visibility='checkpoint' (the default), which needs no setting"
        )


def begin(connection: Any, gid: str, same_subtask: str) -> None:
    """Start transaction ``gid`` on an autocommit ``connection``, first rolling back what
    an earlier attempt of this subtask prepared for the same checkpoint (ids starting with
    ``same_subtask``): a failed attempt's prepared transaction would hold its locks."""
    for xid in pgsql.prepared(connection, same_subtask):
        connection.tpc_rollback(xid)
    connection.autocommit = False
    connection.tpc_begin(gid)


def roll_back(conninfo: str, gid: str, who: str) -> None:
    """Roll back exactly the prepared transaction ``gid`` (attempt 1's id prefixes 10's)."""
    with pgsql.connect(conninfo, True, who) as connection:
        for xid in pgsql.prepared(connection, gid):
            if xid.gtrid == gid:
                connection.tpc_rollback(xid)


def hint(error: Exception) -> str:
    """What to do about a PREPARE refused for want of prepared transactions."""
    if "prepared transactions" in str(error):
        return ": raise max_prepared_transactions to at least the sink's parallelism"
    return ""
