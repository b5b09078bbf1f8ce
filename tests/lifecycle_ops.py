"""Small operators for lifecycle tests: pass batches through, fail where told to."""

from __future__ import annotations

import pyarrow as pa

from flintlock import OneInputStreamOperator, TwoInputStreamOperator


class Boom(Exception):
    """The failure a test injects."""


class Passthrough(OneInputStreamOperator):
    """Emits every batch unchanged; raises ``Boom`` in the method named ``fail_in``."""

    def __init__(self, name: str, fail_in: str | None = None) -> None:
        super().__init__(name)
        self.fail_in = fail_in

    def _maybe_fail(self, method: str) -> None:
        if self.fail_in == method:
            raise Boom(f"{self.name} failed in {method}")

    def setup(self, context, output) -> None:  # type: ignore[no-untyped-def]
        self._maybe_fail("setup")
        super().setup(context, output)

    def open(self) -> None:
        self._maybe_fail("open")

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self._maybe_fail("process_batch")
        self.output.emit(batch)

    def finish(self) -> None:
        self._maybe_fail("finish")

    def close(self) -> None:
        self._maybe_fail("close")


class Union2(TwoInputStreamOperator):
    """Emits the batches of both inputs unchanged."""

    def process_batch1(self, batch: pa.RecordBatch) -> None:
        self.output.emit(batch)

    def process_batch2(self, batch: pa.RecordBatch) -> None:
        self.output.emit(batch)


def batch(*values: int) -> pa.RecordBatch:
    """A one-column batch ``v``."""
    return pa.record_batch({"v": pa.array(values, pa.int64())})
