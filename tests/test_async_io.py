"""Async I/O (AsyncDataStream.ordered_wait / unordered_wait) in the harness: result order,
watermarks among results, capacity, timeouts, retries, and the rows in flight at a
checkpoint called again after a restore — each compared with what plain Python expects."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flintlock import (
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    GraphError,
    LifecycleError,
    OneInputStreamOperator,
    StreamExecutionEnvironment,
    Watermark,
)
from flintlock.errors import AsyncTimeoutError
from flintlock.operators.async_io import AsyncWaitOperator
from flintlock.testing import OneInputHarness


class Lookup(AsyncFunction):
    """Answers ``{"id", "answer"}`` after ``delays[id]`` ms; counts calls in flight."""

    def __init__(self, delays: dict[int, int] | None = None) -> None:
        self.delays = delays or {}
        self.calls: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def async_invoke(self, row: dict[str, Any]) -> Any:
        self.calls.append(row["id"])
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delays.get(row["id"], 0) / 1000)
        finally:
            self.in_flight -= 1
        return {"id": row["id"], "answer": row["id"] * 10}


class Log(OneInputStreamOperator):
    """Logs the ids and watermarks that reach it, in order."""

    def __init__(self) -> None:
        super().__init__("log")
        self.log: list[Any] = []

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.log.extend(batch.column("id").to_pylist())

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        self.log.append(f"w{watermark.timestamp}")
        super().process_watermark(watermark, input_index)


def ids(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array(values, pa.int64())})


def run(operator: AsyncWaitOperator, *feed: pa.RecordBatch | int) -> list[Any]:
    """Feed batches and watermarks (ints), end the input; what reached the next operator."""
    log = Log()
    harness = OneInputHarness(operator, log)
    for item in feed:
        if isinstance(item, int):
            harness.process_watermark(item)
        else:
            harness.process_batch(item)
    harness.complete(1)
    return log.log


MAX_WM = f"w{2**63 - 1}"
SLOW_FIRST = {1: 80, 2: 40, 3: 0, 4: 60, 5: 0}


def test_ordered_results_leave_in_input_order_with_watermarks_in_place() -> None:
    operator = AsyncWaitOperator(Lookup(SLOW_FIRST), timeout_ms=5000, ordered=True)
    assert run(operator, ids(1, 2, 3), 100, ids(4, 5)) == [1, 2, 3, "w100", 4, 5, f"w{2**63 - 1}"]


def test_unordered_results_leave_as_they_complete_but_never_across_a_watermark() -> None:
    operator = AsyncWaitOperator(Lookup(SLOW_FIRST), timeout_ms=5000, ordered=False)
    log = run(operator, ids(1, 2, 3), 100, ids(4, 5))
    assert log[:4] == [3, 2, 1, "w100"]  # fastest first, all three before the watermark
    assert log[4:] == [5, 4, f"w{2**63 - 1}"]


def test_no_more_than_capacity_calls_run_at_once_and_end_input_waits_for_all() -> None:
    lookup = Lookup(dict.fromkeys(range(20), 20))
    operator = AsyncWaitOperator(lookup, timeout_ms=5000, capacity=3, ordered=False)
    log = run(operator, ids(*range(20)))
    assert sorted(x for x in log if isinstance(x, int)) == list(range(20))
    assert lookup.most_in_flight == 3


class Flaky(AsyncFunction):
    """Fails the first ``failures`` calls of each row, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: dict[int, int] = {}

    async def async_invoke(self, row: dict[str, Any]) -> Any:
        attempt = self.attempts[row["id"]] = self.attempts.get(row["id"], 0) + 1
        if attempt <= self.failures:
            raise ConnectionError(f"service down (attempt {attempt})")
        return [{"id": row["id"]}, {"id": -row["id"]}]  # two rows for one


def test_retries_follow_the_strategy_and_a_last_failure_fails_the_task() -> None:
    flaky = Flaky(failures=2)
    retry = AsyncRetryStrategy.fixed_delay(3, 5)
    operator = AsyncWaitOperator(flaky, timeout_ms=5000, retry=retry)
    assert run(operator, ids(1, 2)) == [1, -1, 2, -2, f"w{2**63 - 1}"]
    assert flaky.attempts == {1: 3, 2: 3}
    backoff = AsyncRetryStrategy.exponential_backoff(5, 10, 25)
    assert [backoff.delay_ms(n) for n in range(1, 5)] == [10, 20, 25, 25]

    exhausted = AsyncWaitOperator(Flaky(failures=3), timeout_ms=5000, retry=retry, name="lookup")
    with pytest.raises(LifecycleError) as failed:
        run(exhausted, ids(7))
    assert failed.value.operator == "lookup"
    assert "service down (attempt 3)" in str(failed.value)
    assert "{'id': 7}" in str(failed.value)  # the row whose call failed


class Stuck(AsyncFunction):
    """Never answers row 2 within any timeout; answers the others."""

    async def async_invoke(self, row: dict[str, Any]) -> Any:
        if row["id"] == 2:
            await asyncio.sleep(60)
        return {"id": row["id"]}


class StuckWithFallback(Stuck):
    def timeout(self, row: dict[str, Any]) -> Any:
        return {"id": -row["id"]}


def test_a_timeout_fails_the_task_unless_the_function_says_what_to_emit() -> None:
    with pytest.raises(LifecycleError) as failed:
        run(AsyncWaitOperator(Stuck(), timeout_ms=50), ids(1, 2, 3))
    assert isinstance(failed.value.__cause__, AsyncTimeoutError)
    assert "{'id': 2}" in str(failed.value)
    fallback = AsyncWaitOperator(StuckWithFallback(), timeout_ms=50)
    assert run(fallback, ids(1, 2, 3)) == [1, -2, 3, f"w{2**63 - 1}"]


class Gate(AsyncFunction):
    """Answers rows below ``open_below`` at once; the others wait for ``release``."""

    def __init__(self, open_below: int) -> None:
        self.open_below = open_below
        self.release = threading.Event()
        self.calls: list[int] = []

    async def async_invoke(self, row: dict[str, Any]) -> Any:
        self.calls.append(row["id"])
        while row["id"] >= self.open_below and not self.release.is_set():
            await asyncio.sleep(0.005)
        return {"id": row["id"]}


def test_rows_in_flight_at_a_checkpoint_are_called_again_after_a_restore() -> None:
    before = Gate(open_below=3)
    first_log = Log()
    first = OneInputHarness(AsyncWaitOperator(before, timeout_ms=5000, name="lookup"), first_log)
    first.process_batch(ids(0, 1, 2, 3, 4))
    first.process_watermark(50)
    first.process_batch(ids(5))
    while len(before.calls) < 6:  # every call started; rows 3, 4 and 5 wait
        threading.Event().wait(0.005)
    snapshot = first.checkpoint(1)  # 0, 1, 2 are answered: they left before the snapshot
    assert first_log.log == [0, 1, 2]

    after = Gate(open_below=100)
    second_log = Log()
    second = OneInputHarness(
        AsyncWaitOperator(after, timeout_ms=5000, name="lookup"), second_log, restore_from=snapshot
    )
    second.complete(2)
    assert after.calls == [3, 4, 5]  # called again, in order; nothing else
    assert second_log.log == [3, 4, "w50", 5, f"w{2**63 - 1}"]


def test_the_datastream_api_checks_the_function_timeout_and_capacity() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    stream = env.from_collection([{"id": 1}])

    def blocking(row: dict[str, Any]) -> Any:
        return row

    with pytest.raises(GraphError, match="must be an AsyncFunction whose async_invoke"):
        AsyncDataStream.ordered_wait(stream, blocking, 100)  # type: ignore[arg-type]
    with pytest.raises(GraphError, match="timeout must be a positive"):
        AsyncDataStream.unordered_wait(stream, Lookup(), 0)
    with pytest.raises(GraphError, match="capacity must be a positive"):
        AsyncDataStream.unordered_wait(stream, Lookup(), 100, capacity=0)

    async def lookup(row: dict[str, Any]) -> Any:
        return {"id": row["id"], "answer": "x"}

    schema = pa.schema([("id", pa.int64()), ("answer", pa.string())])
    looked_up = AsyncDataStream.ordered_wait(stream, lookup, 100, output_schema=schema)
    assert looked_up.schema == schema


class BulkLookup(AsyncFunction):
    """One call per input batch (a bulk request): ids and their answers, as a batch."""

    def __init__(self, hold_batches_from: int | None = None, first_slow: bool = False) -> None:
        self.calls: list[list[int]] = []
        self.first_slow = first_slow
        self.hold_from = hold_batches_from
        self.release = threading.Event()

    async def async_invoke_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        ids = batch.column("id").to_pylist()
        self.calls.append(ids)
        while self.hold_from is not None and ids[0] >= self.hold_from:
            if self.release.is_set():
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.03 if self.first_slow and ids[0] == 0 else 0)
        return pa.record_batch({"id": batch.column("id"), "answer": pc.multiply(batch["id"], 10)})


def test_the_batch_form_makes_one_call_per_batch_and_keeps_its_place() -> None:
    lookup = BulkLookup(first_slow=True)  # the first batch answers last
    ordered = AsyncWaitOperator(lookup, timeout_ms=5000, ordered=True)
    assert run(ordered, ids(0, 1), ids(2, 3), 50, ids(4)) == [0, 1, 2, 3, "w50", 4, MAX_WM]
    assert lookup.calls == [[0, 1], [2, 3], [4]]
    unordered = AsyncWaitOperator(BulkLookup(first_slow=True), timeout_ms=5000, ordered=False)
    assert run(unordered, ids(0, 1), ids(2, 3), 50, ids(4)) == [2, 3, 0, 1, "w50", 4, MAX_WM]


def test_a_batch_in_flight_at_a_checkpoint_is_called_again_whole() -> None:
    before, first_log = BulkLookup(hold_batches_from=2), Log()  # [2, 3, 4] held: in flight
    first = OneInputHarness(AsyncWaitOperator(before, timeout_ms=120_000), first_log)
    first.process_batch(ids(0, 1))
    first.process_batch(ids(2, 3, 4))
    # [0, 1] answered: its mail waits, or the second batch's input already ran it
    while len(before.calls) < 2 or not (first.task.mailbox.mails or first_log.log):
        threading.Event().wait(0.005)
    snapshot = first.checkpoint(1)
    assert first_log.log == [0, 1]  # emitted before the snapshot; [2, 3, 4] was in flight
    after, log = BulkLookup(), Log()
    second = OneInputHarness(AsyncWaitOperator(after, timeout_ms=5000), log, restore_from=snapshot)
    second.complete(2)
    assert after.calls == [[2, 3, 4]]
    assert log.log == [2, 3, 4, MAX_WM]
