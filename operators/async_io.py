"""Async I/O (Flink's AsyncWaitOperator): each row's ``async_invoke`` runs on an asyncio
loop of the operator's own, up to ``capacity`` at once; results come back through the
task's mailbox and leave in input order (ordered) or as they complete between
watermarks (unordered).

The rows still in flight at a checkpoint (their calls running, or their results waiting
for their turn) are the operator's state, with the watermarks between them: a restored
subtask calls them again, so a failure or a savepoint loses and duplicates nothing
(the service may see a call twice, as in Flink). ``end_input`` waits for every call."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pyarrow as pa

from flintlock import (
    AsyncFunction,
    AsyncRetryStrategy,
    ListStateDescriptor,
    OneInputStreamOperator,
    Watermark,
    hookimpl,
)
from flintlock.errors import AsyncTimeoutError, MailboxClosedError
from flintlock.operators.async_queue import Element, InFlight, OrderedQueue, UnorderedQueue
from flintlock.plugin_api import (
    HeldOutputMixin,
    RowBatchBuilder,
    UdfOperatorMixin,
    conform_batch,
    overrides,
)

IN_FLIGHT = ListStateDescriptor[dict[str, Any]](
    "async-in-flight", pa.struct([("row", pa.binary()), ("watermark", pa.int64())])
)
"""The queue at a checkpoint, in order: a row (a one-row Arrow IPC stream) or a watermark."""
_TIMED_OUT = object()
WAIT_SECONDS = 600.0
"""How long a full queue or ``end_input`` waits for one result before failing the task."""


class _EventLoop:
    """An asyncio loop in a daemon thread: the operator's calls run there."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, calls: list[tuple[Any, Callable[[Any], None]]]) -> None:
        """Start coroutines (one wake-up of the loop for them all); each ``done(outcome)``
        gets its coroutine's result or exception, on the loop's thread."""

        def start() -> None:
            for call, done in calls:
                self.loop.create_task(call).add_done_callback(partial(_finished, done))

        self.loop.call_soon_threadsafe(start)

    def stop(self) -> None:
        """Cancel every running call, wait (10 s at most) until they ended, stop."""

        async def cancel_all() -> None:
            calls = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)

        with contextlib.suppress(Exception):  # a call that ignores cancelling: leave it
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


def _finished(done: Callable[[Any], None], task: asyncio.Task[Any]) -> None:
    if not task.cancelled():  # cancelled: the operator is closing
        done(task.exception() or task.result())


class _AsyncCallable(AsyncFunction):
    """An AsyncFunction over a plain ``async def f(row)``."""

    def __init__(self, call: Callable[[Any], Any]) -> None:
        self.call = call

    async def async_invoke(self, row: Any) -> Any:
        return await self.call(row)


class AsyncWaitOperator(HeldOutputMixin, UdfOperatorMixin[AsyncFunction], OneInputStreamOperator):
    """Runs an AsyncFunction per row, ``capacity`` calls at most in flight."""

    def __init__(
        self,
        function: AsyncFunction | Callable[[Any], Any],
        timeout_ms: int,
        capacity: int = 100,
        ordered: bool = True,
        retry: AsyncRetryStrategy | None = None,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__(name or "async_wait")
        self.function = (
            function if isinstance(function, AsyncFunction) else _AsyncCallable(function)
        )
        self.timeout_ms, self.capacity, self.ordered = timeout_ms, capacity, ordered
        self.retry = retry or AsyncRetryStrategy.no_retry()
        self.output_schema = output_schema
        self._builder = RowBatchBuilder(self.name, output_schema)
        self._per_batch = overrides(self.function, "async_invoke_batch", AsyncFunction)
        self._queue: OrderedQueue | UnorderedQueue = OrderedQueue() if ordered else UnorderedQueue()
        self._seq = 0
        self._done: list[tuple[InFlight, Any]] = []
        self._done_lock = threading.Lock()
        self._loop: _EventLoop | None = None
        self._to_start: list[tuple[Any, Callable[[Any], None]]] = []

    def initialize_state(self) -> None:
        super().initialize_state()
        self._state = self.context.operator_state.get_list_state(IN_FLIGHT)

    def open(self) -> None:
        super().open()
        self._loop = _EventLoop(f"flintlock-async-{self.name}")
        for element in self._state.get():  # a restore: call the rows again, in order
            if element["watermark"] is not None:
                self._add_watermark(Watermark(element["watermark"]))
            else:
                batch = pa.ipc.open_stream(element["row"]).read_next_batch()
                if self._per_batch:
                    self._call(batch, -1, None)
                else:
                    self._call(batch, 0, batch.to_pylist()[0])
        self._start_calls()
        self._state.update([])

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if self._per_batch:
            self._call(batch, -1, None)
        else:
            for index, row in enumerate(batch.to_pylist()):
                self._call(batch, index, row)
        self._start_calls()

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        self._add_watermark(watermark)

    def end_input(self, input_index: int) -> None:
        while self._queue.rows or self._done:
            self._wait("the input ended")

    def finish(self) -> None:
        super().finish()
        self.emit_held()

    def snapshot_state(self, checkpoint_id: int) -> None:
        # no emitting here: the operators after this one took their snapshots already (the
        # task ran the waiting mails before); results that came since are stored as rows
        super().snapshot_state(checkpoint_id)
        self._state.update([_as_state(element) for element in self._queue.in_order()])

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.stop()
        super().close()

    # ---- calls and results ----

    def _call(self, batch: pa.RecordBatch, index: int, row: dict[str, Any] | None) -> None:
        """Queue ``row``'s call (started with the others of its batch), once there is room."""
        if self._queue.rows >= self.capacity:
            self._start_calls()
            while self._queue.rows >= self.capacity:
                self._wait(f"the queue is full ({self.capacity} rows in flight)")
        entry = InFlight(self._seq, row, batch, index)
        self._seq += 1
        self._queue.add(entry)
        call = _within(self._attempts(batch if row is None else row), self.timeout_ms / 1000)
        self._to_start.append((call, partial(self._arrived, entry)))

    def _start_calls(self) -> None:
        if self._to_start:
            assert self._loop is not None
            calls, self._to_start = self._to_start, []
            self._loop.submit(calls)

    async def _attempts(self, row: Any) -> Any:
        """``async_invoke(row)`` (or ``async_invoke_batch(batch)``), tried again as the
        retry strategy says. (Named ``row``: a failure's report shows it as the record.)"""
        retry, attempt = self.retry, 1
        invoke = self.function.async_invoke_batch if self._per_batch else self.function.async_invoke
        while True:
            try:
                result = await invoke(row)
            except Exception as error:
                if attempt >= retry.max_attempts or not retry.retries_error(error):
                    raise
            else:
                if attempt >= retry.max_attempts or not retry.retries_result(result):
                    return result
            await asyncio.sleep(retry.delay_ms(attempt) / 1000)
            attempt += 1

    def _arrived(self, entry: InFlight, outcome: Any) -> None:
        """On the loop's thread: queue the outcome; one mail takes all that arrived."""
        with self._done_lock:
            self._done.append((entry, outcome))
            first = len(self._done) == 1
        if first:
            # refused once the operator finished or closed: nothing waits for it then
            with contextlib.suppress(MailboxClosedError):
                self.mailbox.execute(self._take_results, "async results")

    def _take_results(self) -> None:
        """On the task's thread: give each arrived row its results; emit what may leave."""
        with self._done_lock:
            arrived, self._done = self._done, []
        for entry, outcome in arrived:
            what = f"{entry.batch.num_rows} rows" if entry.row is None else f"the row {entry.row!r}"
            if isinstance(outcome, BaseException):
                if hasattr(outcome, "add_note"):  # Python 3.11
                    outcome.add_note(f"the async call for {what}")
                raise outcome
            if outcome is _TIMED_OUT:
                if entry.row is None:
                    raise AsyncTimeoutError(f"the async call for a batch of {what} timed out")
                outcome = self.function.timeout(entry.row)
            entry.results = (
                _batch(outcome, self.name) if entry.row is None else _rows(outcome, self.name)
            )
            self._queue.completed(entry)
        self._emit(self._queue.ready())

    def _add_watermark(self, watermark: Watermark) -> None:
        self._queue.add_watermark(watermark)
        self._emit(self._queue.ready())

    def _emit(self, elements: list[Element]) -> None:
        rows: list[dict[str, Any]] = []
        for element in elements:
            if isinstance(element, Watermark):
                self._emit_rows(rows)
                rows = []
                super().process_watermark(element)
            elif isinstance(element.results, pa.RecordBatch):
                self._emit_rows(rows)
                rows = []
                batch = element.results
                if self.output_schema is not None:
                    batch = conform_batch(batch, self.output_schema, self.name)
                self.output.emit(batch)
            else:
                assert element.results is not None
                rows.extend(element.results)
        self._emit_rows(rows)

    def _emit_rows(self, rows: list[dict[str, Any]]) -> None:
        batch = self._builder.build(rows)
        if batch is not None:
            self.output.emit(batch)

    def _wait(self, why: str) -> None:
        if not self.mailbox.yield_(WAIT_SECONDS):
            raise TimeoutError(
                f"operator '{self.name}': no async result for {WAIT_SECONDS} s ({why})"
            )


async def _within(call: Any, seconds: float) -> Any:
    """``call``'s result, or _TIMED_OUT after ``seconds`` (retries included, as Flink's)."""
    try:
        return await asyncio.wait_for(call, seconds)
    except asyncio.TimeoutError:
        return _TIMED_OUT


def _rows(outcome: Any, operator: str) -> list[dict[str, Any]]:
    """A result as rows: None is none, a dict one, a list (or tuple) of dicts several."""
    if outcome is None:
        return []
    if isinstance(outcome, dict):
        return [outcome]
    if isinstance(outcome, list | tuple) and all(isinstance(r, dict) for r in outcome):
        return list(outcome)
    raise TypeError(
        f"operator '{operator}': async_invoke returned {type(outcome).__name__}; return a "
        f"row (dict), a list of rows or None"
    )


def _batch(outcome: Any, operator: str) -> pa.RecordBatch | list[dict[str, Any]]:
    """A batch call's result as one batch (None or no rows: no rows)."""
    if isinstance(outcome, pa.Table):
        outcome = outcome.combine_chunks().to_batches()[0] if outcome.num_rows else None
    if outcome is None:
        return []
    if isinstance(outcome, pa.RecordBatch):
        return outcome if outcome.num_rows else []
    raise TypeError(
        f"operator '{operator}': async_invoke_batch returned {type(outcome).__name__}; "
        f"return a pyarrow.RecordBatch (or Table) or None"
    )


def _as_state(element: Element) -> dict[str, Any]:
    if isinstance(element, Watermark):
        return {"row": None, "watermark": element.timestamp}
    sink = pa.BufferOutputStream()
    row = element.batch if element.index < 0 else element.batch.slice(element.index, 1)
    with pa.ipc.new_stream(sink, row.schema) as writer:
        writer.write_batch(row)
    return {"row": sink.getvalue().to_pybytes(), "watermark": None}


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("async_wait", AsyncWaitOperator)
