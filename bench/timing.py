"""Shared by the benchmarks: medians of interleaved runs, and the quiet local Spark session."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def timed(runs: int, variants: dict[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """Median seconds over ``runs`` and the last result, per variant.

    Runs are interleaved (round robin over the variants), so that a slow phase of the
    machine falls on every variant alike rather than on the one that ran then."""
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    results: dict[str, Any] = {}
    for _ in range(runs):
        for name, work in variants.items():
            started = time.perf_counter()
            results[name] = work()
            seconds[name].append(time.perf_counter() - started)
    return {name: (statistics.median(seconds[name]), results[name]) for name in variants}


def rotated_rounds(
    runs: int, variants: dict[str, Callable[[], Any]]
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Each variant's seconds in each of ``runs`` rounds, and its last answer. Each round
    runs every variant once in a rotated order, so that no variant always goes first; a
    ratio of two variants in one round puts a slow moment of the machine on both sides."""
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    answers: dict[str, Any] = {}
    names = list(variants)
    for round_ in range(runs):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            started = time.perf_counter()
            answers[name] = variants[name]()
            seconds[name].append(time.perf_counter() - started)
    return seconds, answers


CORES = 2
"""``local[2]``: the benchmarks' cores, and their baselines' shuffle partitions."""


def local_session(driver_memory: str | None = None) -> Any:
    """A quiet ``local[2]`` session tuned as a user tunes Spark on 2 cores (shuffle
    partitions matched to the cores, not Spark's 200) and with the settings flintlock's
    own stages run with (``core/spark/run_settings.py``: adaptive execution off, Arrow
    batches of ``JOB_ARROW_BATCH_ROWS``), so baselines and flintlock run alike. Its workers
    run on this interpreter; BENCH_SPARK_CONF (``key=value,...``) adds settings for an
    A/B comparison."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from flintlock.core.spark.sources import ARROW_BATCH_ROWS, JOB_ARROW_BATCH_ROWS

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(CORES))
        .config(ARROW_BATCH_ROWS, JOB_ARROW_BATCH_ROWS)
    )
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    for setting in filter(None, os.environ.get("BENCH_SPARK_CONF", "").split(",")):
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    return builder.getOrCreate()
