"""Async I/O (Flink's AsyncFunction and AsyncRetryStrategy): a user function whose calls
to an external service overlap instead of blocking the task record by record.

``async_invoke(row)`` is a coroutine run on an asyncio loop the operator owns; its
result (a row, a list of rows, or None for none) is emitted on the task's thread. A
call that takes longer than the operator's timeout is cancelled and, after the retry
strategy's attempts, handed to ``timeout(row)`` (which fails the task by default, as in
Flink)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

import pyarrow as pa

from flintlock.core.api.functions import Function
from flintlock.core.errors import AsyncTimeoutError

if TYPE_CHECKING:
    from flintlock.core.api.functions import Row

AsyncResult = Union["Row", Sequence["Row"], None]
"""What ``async_invoke`` returns: a row (dict), a list of rows, or None (no row)."""


class AsyncFunction(Function):
    """Override ``async_invoke`` (per row) or ``async_invoke_batch`` (per batch: one call
    for a whole input batch, e.g. a bulk lookup; capacity then counts batches);
    optionally ``timeout``. ``open`` and ``close`` run on the task's thread, the
    coroutines on the operator's event loop (one per subtask)."""

    async def async_invoke(self, row: Row) -> AsyncResult:
        """The rows for ``row``: a row, a list of rows, or None."""
        raise NotImplementedError(f"{type(self).__name__} does not override async_invoke")

    async def async_invoke_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        """The rows for a whole input batch, as a batch (None: none)."""
        raise NotImplementedError

    def timeout(self, row: Row) -> AsyncResult:
        """What to emit for ``row`` when its calls timed out; by default the task fails."""
        raise AsyncTimeoutError(f"the async call for the row {row!r} timed out")


@dataclass(frozen=True)
class AsyncRetryStrategy:
    """When and how long after a failed or timed-out attempt an async call is tried
    again (Flink's AsyncRetryStrategies): ``fixed_delay`` or ``exponential_backoff``.

    ``retry_on`` are the exception types that are retried (a timeout is one:
    ``TimeoutError``); ``retry_if_result`` retries a call whose result it holds for."""

    max_attempts: int
    initial_delay_ms: int
    max_delay_ms: int
    multiplier: float = 1.0
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    retry_if_result: Callable[[AsyncResult], bool] | None = None

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.initial_delay_ms < 0 or self.multiplier < 1:
            raise ValueError(
                f"AsyncRetryStrategy: max_attempts >= 1, delays >= 0 and multiplier >= 1, "
                f"got {self.max_attempts}, {self.initial_delay_ms} ms, {self.multiplier}"
            )

    @classmethod
    def no_retry(cls) -> AsyncRetryStrategy:
        """One attempt."""
        return cls(1, 0, 0)

    @classmethod
    def fixed_delay(
        cls,
        max_attempts: int,
        delay_ms: int,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        retry_if_result: Callable[[AsyncResult], bool] | None = None,
    ) -> AsyncRetryStrategy:
        """Up to ``max_attempts`` attempts, ``delay_ms`` apart."""
        return cls(max_attempts, delay_ms, delay_ms, 1.0, retry_on, retry_if_result)

    @classmethod
    def exponential_backoff(
        cls,
        max_attempts: int,
        initial_delay_ms: int,
        max_delay_ms: int,
        multiplier: float = 2.0,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        retry_if_result: Callable[[AsyncResult], bool] | None = None,
    ) -> AsyncRetryStrategy:
        """Up to ``max_attempts`` attempts, the pause multiplied each time, capped."""
        return cls(
            max_attempts, initial_delay_ms, max_delay_ms, multiplier, retry_on, retry_if_result
        )

    def delay_ms(self, attempt: int) -> int:
        """The pause after failed attempt ``attempt`` (1-based)."""
        delay = self.initial_delay_ms * self.multiplier ** (attempt - 1)
        return int(min(delay, self.max_delay_ms))

    def retries_error(self, error: BaseException) -> bool:
        """True if an attempt that raised ``error`` is tried again."""
        return isinstance(error, self.retry_on)

    def retries_result(self, result: AsyncResult) -> bool:
        """True if an attempt that returned ``result`` is tried again."""
        return self.retry_if_result is not None and bool(self.retry_if_result(result))
