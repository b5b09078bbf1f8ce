"""Epoch stages shared between jobs of one process (``core/spark/epoch_frames.py``): jobs
over the same DataFrame in the same stage widths run the same stages, each with its own
functions and run from its epoch's local property; a layout too large for the property
keeps its plan in its own stages."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.spark import epoch_frames, stage_frames

pytestmark = pytest.mark.slow
ROWS = 600


def scaled(factor: int) -> Any:
    """A per-batch map multiplying ``v`` by ``factor`` (a closure: its own value per job)."""

    def scale(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch(
            [batch.column("k"), pc.multiply(batch.column("v"), factor)], names=["k", "v"]
        )

    return scale


def run(spark: Any, frame: Any, folder: Path, name: str, factor: int, keyed: bool) -> pa.Table:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(folder))
    stream = env.from_dataframe(frame).map_batch(scaled(factor))
    if keyed:  # a second stage after the keyed exchange
        stream = stream.key_by("k").map_batch(scaled(1))
    return stream.execute_and_collect(name)


def expected(factor: int) -> list[tuple[int, int]]:
    return sorted((i % 7, i * factor) for i in range(ROWS))


def rows(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(table.column("k").to_pylist(), table.column("v").to_pylist(), strict=True))


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each epoch frame built from here on: True where its stages are shared."""
    built: list[bool] = []
    plain = stage_frames.build_stages

    def building(*args: Any) -> Any:
        built.append(args[3] is None)  # no plan in its functions: shared
        return plain(*args)

    monkeypatch.setattr(stage_frames, "build_stages", building)
    monkeypatch.setattr(epoch_frames, "build_stages", building)
    return built


@pytest.mark.parametrize("keyed", [False, True], ids=["one stage", "two stages"])
def test_jobs_over_one_frame_share_its_stages_each_with_its_own_functions(
    spark: Any, tmp_path: Path, builds: list[bool], keyed: bool
) -> None:
    frame = spark.range(0, ROWS, 1, 2).select((F.col("id") % 7).alias("k"), F.col("id").alias("v"))
    for factor in (2, 3, 5):
        table = run(spark, frame, tmp_path, f"shared-{keyed}-{factor}", factor, keyed)
        assert rows(table) == expected(factor)
    assert builds == [True]  # built by the first job; the others ran their plans in them
    other = frame.select("k", "v")  # another DataFrame: stages of its own
    assert rows(run(spark, other, tmp_path, f"other-{keyed}", 4, keyed)) == expected(4)
    assert builds == [True, True]


def test_jobs_on_two_threads_run_the_same_stages_each_with_its_own_plan(
    spark: Any, tmp_path: Path, builds: list[bool]
) -> None:
    frame = spark.range(0, ROWS, 1, 2).select((F.col("id") % 7).alias("k"), F.col("id").alias("v"))
    assert rows(run(spark, frame, tmp_path, "first", 1, True)) == expected(1)
    results: dict[int, pa.Table] = {}
    errors: list[BaseException] = []

    def job(factor: int) -> None:
        try:
            for round_ in range(3):
                results[factor * 10 + round_] = run(
                    spark, frame, tmp_path, f"thread-{factor}-{round_}", factor, True
                )
        except BaseException as error:  # handed to the test's thread
            errors.append(error)

    threads = [threading.Thread(target=job, args=(factor,)) for factor in (3, 11)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for key, table in results.items():
        assert rows(table) == expected(key // 10), key
    assert builds == [True]  # seven jobs, one build


def test_a_layout_too_large_for_the_property_keeps_its_plan_in_its_stages(
    spark: Any, tmp_path: Path, builds: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(epoch_frames, "SHARED_LAYOUT_LIMIT", 100)  # every layout is larger
    frame = spark.range(0, ROWS, 1, 2).select((F.col("id") % 7).alias("k"), F.col("id").alias("v"))
    for factor in (2, 3):
        assert rows(run(spark, frame, tmp_path, f"own-{factor}", factor, True)) == expected(factor)
    assert builds == [False, False]  # a frame of its own per job, with its plan inside
