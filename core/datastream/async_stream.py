"""``AsyncDataStream.ordered_wait`` / ``unordered_wait`` (Flink's and PyFlink's names):
a stream through an async function, its calls overlapping, checked before Spark runs."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.api.async_functions import AsyncFunction, AsyncResult, AsyncRetryStrategy
from flintlock.core.api.functions import overrides
from flintlock.core.errors import GraphError

if TYPE_CHECKING:
    from flintlock.core.api.functions import Row
    from flintlock.core.datastream.datastream import DataStream

AsyncCallable = Callable[["Row"], Awaitable[AsyncResult]]
"""An ``async def f(row)`` that returns a row, a list of rows or None."""


class AsyncDataStream:
    """Builds async I/O steps: ``AsyncDataStream.unordered_wait(stream, lookup, 1000)``."""

    @staticmethod
    def ordered_wait(
        stream: DataStream,
        function: AsyncFunction | AsyncCallable,
        timeout: int | timedelta,
        capacity: int = 100,
        retry_strategy: AsyncRetryStrategy | None = None,
        output_schema: pa.Schema | None = None,
        name: str | None = None,
    ) -> DataStream:
        """Results leave in the order of their rows; ``timeout`` (ms) bounds each row's
        calls, retries included; at most ``capacity`` rows in flight per subtask."""
        return _async_wait(
            stream, function, timeout, capacity, retry_strategy, output_schema, name, True
        )

    @staticmethod
    def unordered_wait(
        stream: DataStream,
        function: AsyncFunction | AsyncCallable,
        timeout: int | timedelta,
        capacity: int = 100,
        retry_strategy: AsyncRetryStrategy | None = None,
        output_schema: pa.Schema | None = None,
        name: str | None = None,
    ) -> DataStream:
        """Results leave as their calls complete, but never across a watermark."""
        return _async_wait(
            stream, function, timeout, capacity, retry_strategy, output_schema, name, False
        )


def _async_wait(
    stream: DataStream,
    function: AsyncFunction | AsyncCallable,
    timeout: int | timedelta,
    capacity: int,
    retry: AsyncRetryStrategy | None,
    output_schema: pa.Schema | None,
    name: str | None,
    ordered: bool,
) -> DataStream:
    method = "ordered_wait" if ordered else "unordered_wait"
    where = f"AsyncDataStream.{method}({name or ''})"
    if isinstance(function, AsyncFunction):
        per_batch = overrides(function, "async_invoke_batch", AsyncFunction)
        invoke = getattr(type(function), "async_invoke_batch" if per_batch else "async_invoke")
    else:
        invoke = function
    if not inspect.iscoroutinefunction(invoke):
        raise GraphError(
            f"{where}: the function must be an AsyncFunction whose async_invoke (or "
            f"async_invoke_batch) is an 'async def', or an 'async def f(row)', not "
            f"{type(function).__name__}"
        )
    millis = int(timeout.total_seconds() * 1000) if isinstance(timeout, timedelta) else timeout
    if not isinstance(millis, int) or millis <= 0:
        raise GraphError(f"{where}: timeout must be a positive number of ms, got {timeout!r}")
    if not isinstance(capacity, int) or capacity < 1:
        raise GraphError(f"{where}: capacity must be a positive int, got {capacity!r}")
    if retry is not None and not isinstance(retry, AsyncRetryStrategy):
        raise GraphError(f"{where}: retry_strategy must be an AsyncRetryStrategy")
    schema = stream._output_schema(method, name, function, output_schema)
    factory = stream.env.operator("async_wait")
    return stream._then(
        "async_wait",
        name,
        lambda n: factory(
            function,
            timeout_ms=millis,
            capacity=capacity,
            ordered=ordered,
            retry=retry,
            name=n,
            output_schema=output_schema,
        ),
        schema=schema,
    )
