"""Operators of tests/spark/test_multiple_input_jobs.py (pickled by value to the workers)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from flintlock import MultipleInputStreamOperator


class TagByInput(MultipleInputStreamOperator):
    """Tags each row (its first column, as ``x``) with its input; at finish, one row per
    input (input -i) with its count."""

    def __init__(self, inputs: int = 3) -> None:
        super().__init__(inputs, name="tag")
        self.counts = [0] * inputs

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> None:
        self.counts[input_index - 1] += batch.num_rows
        tags = pa.array([input_index] * batch.num_rows, pa.int64())
        values = pc.cast(batch.column(0), pa.int64())  # x, or a sequence's id
        self.output.emit(pa.record_batch({"x": values, "input": tags}))

    def finish(self) -> None:
        inputs = pa.array([-i for i in range(1, len(self.counts) + 1)], pa.int64())
        totals = pa.array(self.counts, pa.int64())  # input -i: how many rows input i had
        self.output.emit(pa.record_batch({"x": totals, "input": inputs}))
