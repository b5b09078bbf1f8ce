"""What a Nexmark query is here: how flintlock runs it, and how DuckDB answers it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flintlock import DataStream

Build = Callable[[dict[str, DataStream]], DataStream]
"""Makes the query's output stream from the job's input streams, by kind ("bid", ...)."""


@dataclass(frozen=True)
class Query:
    """One Nexmark query: its flintlock forms and its reference in SQL.

    ``reference_sql`` runs in DuckDB over the tables ``person``, ``auction`` and ``bid``
    (the same events the job reads) and returns the rows the job's output must equal, as
    a multiset over ``columns`` (the job's output is compared after both are sorted)."""

    name: str
    title: str
    inputs: tuple[str, ...]
    """The kinds of event the query reads: its sources ("person", "auction", "bid")."""
    batch: Build
    """The idiomatic batch-level form (Arrow compute, column aggregates, batch state)."""
    reference_sql: str
    columns: tuple[str, ...]
    """The output columns compared with the reference, in the reference's order."""
    per_record: Build | None = None
    """The per-record form (a Python function per row), where the query is naturally one."""
    float_digits: int | None = None
    """Float columns are compared rounded to this many digits (None: exactly)."""
    check: str = "rows"
    """How the output is compared: "rows" (as a multiset), "last per key" (an updating
    query: the last row per key, ``key`` columns) or "totals" (column sums per key: an
    output that depends on wall time, as q12's, must add up to the reference)."""
    key: tuple[str, ...] = ()
    latency_column: str | None = "date_time"
    """The output's timestamp column that says when a row could first be computed (an
    input row's event time, a window's end): latency is measured from it. None: the
    output has no such column (an updating aggregate), and latency is not measured."""
