"""Shared fixtures: a lifecycle recorder whose hook coverage the guard test reads."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator

import pytest
from hook_tally import HOOKS_SEEN, PHASES_SEEN
from jvm_class_archive import archive_option

from flintlock.testing import LifecycleRecorder

pytest_plugins = [
    "postgres_server",  # a real PostgreSQL server, started when a test asks
    "s3_server",  # a real S3-compatible server (moto), likewise
    "spark_cluster",  # a real Spark standalone master and two workers, likewise
    "kafka_server",  # a real Apache Kafka broker (KRaft), likewise
]

TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""Every test JVM (this process's session, each driver script's embedded one) compiles
with C1 only: short-lived JVMs then start on about a third less CPU, and the suite is
CPU-bound on two cores. Spark's semantics do not change; a user's JVM keeps its own."""
if "FLINTLOCK_DRIVER_JAVA_OPTIONS" not in os.environ:  # scripts inherit it
    # with the classes Spark's driver loads shared from an archive made once per machine
    shared = archive_option(TEST_JAVA_OPTIONS)
    os.environ["FLINTLOCK_DRIVER_JAVA_OPTIONS"] = f"{TEST_JAVA_OPTIONS} {shared}"


@pytest.fixture
def make_recorder() -> Iterator[Callable[[], LifecycleRecorder]]:
    """Makes LifecycleRecorders; what they saw counts toward the hook-coverage guard."""
    made: list[LifecycleRecorder] = []

    def make() -> LifecycleRecorder:
        made.append(LifecycleRecorder())
        return made[-1]

    yield make
    for recording in made:
        HOOKS_SEEN.update(recording.hooks_seen)
        for calls in recording.by_task.values():
            PHASES_SEEN.update(call[1] for call in calls if call[0] == "task")


@pytest.fixture
def recorder(make_recorder: Callable[[], LifecycleRecorder]) -> LifecycleRecorder:
    """A fresh LifecycleRecorder whose recordings count toward the hook-coverage guard."""
    return make_recorder()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One quiet local[2] session shared by every test of this process that needs Spark.

    Tests needing task retries (``local[2,4]``) or Spark Connect run their jobs in a
    process of their own (tests/spark/retry_jobs.py, tests/spark/connect_job.py).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("flintlock-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.extraJavaOptions", os.environ["FLINTLOCK_DRIVER_JAVA_OPTIONS"])
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def ship_test_module_by_value(request: pytest.FixtureRequest) -> None:
    """Functions defined in a test module travel by value: workers cannot import tests."""
    if "spark" not in request.fixturenames:
        return
    from pyspark import cloudpickle

    module = request.module
    if module.__name__ not in cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES:
        cloudpickle.register_pickle_by_value(module)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that run Spark jobs slow; run the hook-coverage guard last."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) or "tests/spark/" in item.nodeid:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_hook_coverage.py"))
