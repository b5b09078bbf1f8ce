"""The sink operator: hands batches (or records) to a SinkFunction; finish() flushes.

Beside it, the operator that runs a TwoPhaseCommitSink's writer on the lifecycle: a
transaction begins at open (an epoch ends in one checkpoint), is pre-committed in
``snapshot_state`` and its committables ride in the acknowledgement to the driver's
committer; one never pre-committed (a failure or cancel) is aborted at close."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flintlock import OneInputStreamOperator, SinkFunction, TwoPhaseCommitSink, hookimpl
from flintlock.plugin_api import SinkWriterContext, UdfOperatorMixin, overrides, rows_of


class SinkOperator(UdfOperatorMixin[SinkFunction], OneInputStreamOperator):
    """Writes each batch with ``write_batch`` (fast path) or ``invoke`` per record."""

    def __init__(self, function: SinkFunction, name: str | None = None) -> None:
        super().__init__(name or "sink")
        self.function = function
        self._per_batch = overrides(function, "write_batch", SinkFunction)
        self.records_written = 0
        """Rows this sink received (counted into the vertex's ``records_out``)."""

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.records_written += batch.num_rows
        if self._per_batch:
            self.function.write_batch(batch)
        else:
            invoke = self.function.invoke
            for row in rows_of(batch):
                invoke(row)


class TwoPhaseCommitSinkOperator(OneInputStreamOperator):
    """Runs a TwoPhaseCommitSink's writer: one transaction per epoch, pre-committed in the
    snapshot; its committables travel in the acknowledgement to the driver's committer."""

    def __init__(self, sink: TwoPhaseCommitSink[Any, Any], name: str | None = None) -> None:
        super().__init__(name or f"sink:{sink.name}")
        self.sink = sink
        self._transaction: Any = None
        self._committables: list[Any] | None = None
        self.records_written = 0
        """Rows this sink received (counted into the vertex's ``records_out``)."""

    def open(self) -> None:
        task = self.context.task
        assert self.context.storage is not None
        writer_context = SinkWriterContext(task, self.context.storage, self.name)
        self._transaction = self.sink.begin_transaction(writer_context, task.epoch)

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.records_written += batch.num_rows
        self.sink.write(self._transaction, batch)

    def finish(self) -> None:
        self.sink.finish(self._transaction)

    def snapshot_state(self, checkpoint_id: int) -> None:
        self._committables = self.sink.pre_commit(self._transaction)
        self._transaction = None

    def committables(self) -> list[Any] | None:
        return self._committables

    def close(self) -> None:
        if self._transaction is not None:  # never pre-committed: failure or cancel
            transaction, self._transaction = self._transaction, None
            self.sink.abort(transaction)


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("sink", SinkOperator)
    register("two_phase_commit_sink", TwoPhaseCommitSinkOperator)
