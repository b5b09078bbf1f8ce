"""Jobs of Nexmark queries and their check against DuckDB on the same events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock import DataStream, StreamExecutionEnvironment

from .model import KINDS, SCHEMAS, Generator, NexmarkConfig, events_of_kind
from .queries import Query
from .source import NexmarkSource


def input_streams(
    env: StreamExecutionEnvironment,
    kinds: Iterable[str],
    events: int | None,
    events_per_epoch: int | None = None,
    events_per_second: float | None = None,
    config: NexmarkConfig | None = None,
    paced_by_event_time: bool = False,
) -> dict[str, DataStream]:
    """One Nexmark source per kind, over the same events, with event time and watermarks."""
    streams = {}
    for kind in sorted(set(kinds)):
        source = NexmarkSource(
            kind,
            events,
            events_per_epoch,
            events_per_second,
            config,
            paced_by_event_time=paced_by_event_time,
        )
        streams[kind] = env.from_source(source, source.watermarks(), name=kind)
    return streams


def output_of(query: Query, form: str, streams: dict[str, DataStream]) -> DataStream:
    """The query's output stream in ``form`` ("batch" or "per_record")."""
    build = query.batch if form == "batch" else query.per_record
    if build is None:
        raise ValueError(f"{query.name} has no per-record form")
    return build({kind: streams[kind] for kind in query.inputs})


def run_collected(
    spark: Any,
    names: Iterable[str],
    events: int,
    config: NexmarkConfig,
    checkpoint_dir: str,
    job_name: str = "nexmark",
    forms: Iterable[str] = ("batch", "per_record"),
    epochs: int = 4,
) -> dict[tuple[str, str], pa.Table]:
    """Every query of ``names`` in each of ``forms`` it has, in ONE job of ``epochs``
    epochs over shared sources: each output's rows by (query, form)."""
    from .queries import QUERIES

    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=checkpoint_dir)
    queries = [QUERIES[name] for name in names]
    kinds = {kind for query in queries for kind in query.inputs}
    streams = input_streams(env, kinds, events, -(-events // epochs), config=config)
    handles = {}
    for query in queries:
        for form in forms:
            if form == "batch" or query.per_record is not None:
                stream = output_of(query, form, streams)
                handles[query.name, form] = stream.collect_async(f"{query.name}-{form}")
    result = env.execute(job_name)
    if result.epochs != epochs:
        raise AssertionError(f"{job_name} ran {result.epochs} epochs, not {epochs}")
    return {key: handle.table() for key, handle in handles.items()}


def events_table(kind: str, events: int, config: NexmarkConfig) -> pa.Table:
    """Every ``kind`` event among ``[0, events)``, as the sources read them."""
    generator = Generator(config)
    numbers = events_of_kind(0, events, KINDS[kind])
    chunks = [
        generator.batch(KINDS[kind], numbers[i : i + 65536]) for i in range(0, len(numbers), 65536)
    ]
    return pa.Table.from_batches(chunks, schema=SCHEMAS[kind])


def reference(query: Query, events: int, config: NexmarkConfig) -> pa.Table:
    """The query's answer from DuckDB over the same events."""
    connection = duckdb.connect()
    try:
        for kind in query.inputs:
            connection.register(kind, events_table(kind, events, config))
        connection.execute("SET TimeZone = 'UTC'")
        return connection.sql(query.reference_sql).to_arrow_table()
    finally:
        connection.close()


def differences(query: Query, output: pa.Table, expected: pa.Table, limit: int = 5) -> list[str]:
    """How the job's output differs from the reference: [] when they are equal."""
    want = _rows(query, expected)
    if query.check == "last per key":
        got = _last_per_key(query, output)
    elif query.check == "totals":
        got = _rows(query, _totals(query, output))
    else:
        got = _rows(query, output)
    if got == want:
        return []
    missing = _minus(want, got)
    extra = _minus(got, want)
    return [
        f"{query.name}: {len(got)} rows, the reference has {len(want)}; "
        f"{len(missing)} missing, {len(extra)} not in the reference",
        *[f"  missing: {row}" for row in missing[:limit]],
        *[f"  extra:   {row}" for row in extra[:limit]],
    ]


def _rows(query: Query, table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(_rows_in_order(query, table), key=_order)


def _rows_in_order(query: Query, table: pa.Table) -> list[tuple[Any, ...]]:
    """The compared columns' rows, floats rounded as the query says, timestamps in ms."""
    columns = []
    for name in query.columns:
        if name not in table.column_names:
            raise ValueError(f"{query.name}: no column '{name}' in {table.column_names}")
        column = table.column(name)
        if pa.types.is_floating(column.type) and query.float_digits is not None:
            column = _rounded(column, query.float_digits)
        if pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("ms"))
        columns.append(column.to_pylist())
    return list(zip(*columns, strict=True))


def _rounded(column: pa.ChunkedArray, digits: int) -> pa.Array:
    """``column`` rounded to ``digits`` with numpy: Arrow's round returns a value unchanged
    where its scaled value is already whole (3024.5480000000002 stays, not 3024.548)."""
    values = column.to_numpy(zero_copy_only=False)
    return pa.array(np.round(values, digits), type=column.type, mask=pc.is_null(column).to_numpy())


def _last_per_key(query: Query, table: pa.Table) -> list[tuple[Any, ...]]:
    """An updating query's final rows: the last row the job emitted for each key."""
    positions = [query.columns.index(k) for k in query.key]
    last = {tuple(row[i] for i in positions): row for row in _rows_in_order(query, table)}
    return sorted(last.values(), key=_order)


def _totals(query: Query, table: pa.Table) -> pa.Table:
    """A query's output summed per key: what a non-exact query's rows must add up to."""
    summed = [name for name in query.columns if name not in query.key]
    totals = table.group_by(list(query.key)).aggregate([(name, "sum") for name in summed])
    return pa.table({c: totals.column(c if c in query.key else f"{c}_sum") for c in query.columns})


def _order(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((value is None, value if value is not None else 0) for value in row)


def _minus(left: list[tuple[Any, ...]], right: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    remaining: dict[tuple[Any, ...], int] = {}
    for row in right:
        remaining[row] = remaining.get(row, 0) + 1
    out = []
    for row in left:
        if remaining.get(row, 0):
            remaining[row] -= 1
        else:
            out.append(row)
    return out


__all__ = ["differences", "events_table", "input_streams", "output_of", "reference"]
