"""A multiple-input operator on Spark: three streams (one keyed) into one operator of the
multiple-input task type; every row once with its input, and each subtask's finish once,
after all three inputs ended. Sources chain into it where nothing is exchanged between
them (FLIP-182): a chained unbounded sequence stopped and resumed at another parallelism."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import multiple_input_ops
import pyarrow.parquet as pq
import pytest
from multiple_input_ops import TagByInput
from pyspark import cloudpickle
from unbounded_jobs import wait_for_epochs

from flintlock import GraphError, StreamExecutionEnvironment
from flintlock.core.plan.graph import build_job_graph
from flintlock.sinks.files import FileSink

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


def test_sources_chain_into_the_operator_where_nothing_is_exchanged_between_them() -> None:
    env = StreamExecutionEnvironment(parallelism=2)
    a = env.from_collection([{"x": 1}])
    b = env.from_collection([{"x": 2}]).key_by("x")  # hashed: exchanged
    c = env.from_collection([{"x": 3}])
    d = env.from_collection([{"x": 4}]).set_parallelism(1)  # another parallelism: exchanged
    a.connect_many(b, c, d).transform("tag", lambda: TagByInput(4)).print()
    graph = build_job_graph(env.transformations)
    (tag,) = [v for v in graph.vertices.values() if v.task_type == "multiple-input"]
    assert [(i, t.name) for i, t in tag.chained_sources] == [
        (1, "source:collection"),
        (3, "source:collection-3"),
    ]
    assert sorted(index for _, index, _ in tag.inputs) == [2, 4]
    assert len(graph.vertices) == 3  # b's and d's sources, and the chain they feed
    assert tag.name == "[source:collection, source:collection-3] -> tag -> sink"
    assert graph.to_json()["vertices"][tag.id]["operators"][:2] == [
        "source:collection",
        "source:collection-3",
    ]

    env = StreamExecutionEnvironment(parallelism=2)
    a, b = env.from_collection([{"x": 1}]), env.from_collection([{"x": 2}])
    a.connect_many(b).transform("tag", lambda: TagByInput(2)).print()
    graph = build_job_graph(env.transformations)
    (tag,) = [v for v in graph.vertices.values() if v.task_type == "multiple-input"]
    assert [i for i, _ in tag.chained_sources] == [1]  # input 2 carries the barrier
    assert [index for _, index, _ in tag.inputs] == [2]


def test_a_chained_sequence_stopped_and_resumed_at_another_parallelism_reads_each_id_once(
    spark: Any, tmp_path: Path
) -> None:
    def job(parallelism: int) -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment(
            parallelism=parallelism, spark=spark, checkpoint_dir=str(tmp_path / "chk")
        )
        ids = env.from_sequence(end=300, rows_per_epoch=30)  # chained into input 1
        keyed = env.from_collection([{"x": i} for i in range(1000, 1040)]).key_by("x")
        tagged = ids.connect_many(keyed).transform("tag", lambda: TagByInput(2))
        tagged.sink_to(FileSink(str(tmp_path / "out")), name="files")
        return env

    first = job(2)
    (tag,) = [v for v in build_job_graph(first.transformations).vertices.values() if v.inputs]
    assert [t.name for _, t in tag.chained_sources] == ["source:sequence"]
    client = first.execute_async("chained")
    wait_for_epochs(client, 3)
    savepoint = client.stop()
    stopped = client.result()
    assert stopped.status == "STOPPED"
    finished = job(3).execute("chained", restore_from=savepoint)
    assert finished.status == "FINISHED" and finished.epochs >= 1
    rows = pq.read_table(tmp_path / "out").to_pylist()
    data = sorted((r["x"], r["input"]) for r in rows if r["input"] > 0)
    assert data == [(i, 1) for i in range(300)] + [(i, 2) for i in range(1000, 1040)]
