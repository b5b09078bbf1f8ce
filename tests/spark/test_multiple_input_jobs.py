"""A multiple-input operator on Spark: three streams (one keyed) into one operator of the
multiple-input task type; every row once with its input, and each subtask's finish once,
after all three inputs ended."""

from __future__ import annotations

from typing import Any

import multiple_input_ops
import pytest
from multiple_input_ops import TagByInput
from pyspark import cloudpickle

from flintlock import GraphError, StreamExecutionEnvironment

cloudpickle.register_pickle_by_value(multiple_input_ops)
pytestmark = pytest.mark.slow


def test_three_streams_into_one_operator_each_row_once_with_its_input(spark: Any) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark)
    a = env.from_collection([{"x": i} for i in range(0, 100)])
    b = env.from_collection([{"x": i} for i in range(100, 130)]).key_by("x")
    c = env.from_collection([{"x": i} for i in range(130, 200)])
    table = a.connect_many(b, c).transform("tag", TagByInput).collect(job_name="three")
    rows = table.to_pylist()
    data = sorted((r["x"], r["input"]) for r in rows if r["input"] > 0)
    expected = [(i, 1 if i < 100 else 2 if i < 130 else 3) for i in range(200)]
    assert data == expected
    counts: dict[int, int] = {}
    finishes = [r for r in rows if r["input"] < 0]
    for row in finishes:
        counts[-row["input"]] = counts.get(-row["input"], 0) + row["x"]
    assert counts == {1: 100, 2: 30, 3: 70}  # two subtasks' finish rows add up
    assert len(finishes) == 2 * 3  # each subtask's finish once


def test_the_operator_must_take_as_many_inputs_as_streams() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    a, b = env.from_collection([{"x": 1}]), env.from_collection([{"x": 2}])
    with pytest.raises(
        GraphError, match="MultipleInputStreamOperator of 2 inputs, got TagByInput of 3"
    ):
        a.connect_many(b).transform("tag", TagByInput)
