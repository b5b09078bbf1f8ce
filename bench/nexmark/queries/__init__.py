"""The Nexmark queries as flintlock jobs, each with the same query in DuckDB's SQL as its
independent reference. ``QUERIES`` maps a name ("q0") to its ``Query``."""

from __future__ import annotations

from .aggregates import AGGREGATES
from .base import Query
from .joins import JOINS
from .stateless import STATELESS
from .topn import TOPN
from .windows import WINDOWS

QUERIES: dict[str, Query] = {
    query.name: query for query in [*STATELESS, *WINDOWS, *TOPN, *JOINS, *AGGREGATES]
}

__all__ = ["QUERIES", "Query"]
