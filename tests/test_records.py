"""rows_of: the per-record path's batch -> rows conversion equals ``to_pylist`` exactly."""

from __future__ import annotations

import datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from flintlock.core.runtime.records import rows_of

BATCHES = {
    "numeric": pa.record_batch(
        {
            "i64": pa.array([1, -2, 2**62], pa.int64()),
            "u8": pa.array([0, 7, 255], pa.uint8()),
            "f64": pa.array([0.5, -1.25, 1e300]),
            "f16": pa.array(np.array([1.5, 2.5, -0.0], np.float16)),
        }
    ),
    "nulls and others": pa.record_batch(
        {
            "n": pa.array([None, 2, 3], pa.int64()),
            "b": pa.array([True, None, False]),
            "s": pa.array(["a", None, "ü"]),
            "t": pa.array([datetime.datetime(2026, 11, 22)] * 3),
            "d": pa.array([Decimal("1.10"), None, Decimal("-3.00")]),
            "l": pa.array([[1], [], None]),
        }
    ),
    "names that are not identifiers": pa.record_batch(
        {"a'b": [1, 2], 'c"d\n': ["x", "y"], "": [1.0, 2.0], "zip": [3, 4]}
    ),
    "empty": pa.record_batch({"x": pa.array([], pa.int64())}),
}


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_rows_of_equals_to_pylist(name: str) -> None:
    batch = BATCHES[name]
    rows = rows_of(batch)
    assert rows == batch.to_pylist()
    assert [list(row) for row in rows] == [batch.schema.names] * batch.num_rows  # column order
    assert all(
        type(a) is type(b)
        for r, e in zip(rows, batch.to_pylist(), strict=True)
        for a, b in zip(r.values(), e.values(), strict=True)
    )


def test_rows_of_a_sliced_batch_reads_only_the_slice() -> None:
    batch = pa.record_batch({"v": list(range(10)), "w": [None, *range(9)]}).slice(3, 4)
    assert rows_of(batch) == batch.to_pylist() == [{"v": v, "w": v - 1} for v in range(3, 7)]
