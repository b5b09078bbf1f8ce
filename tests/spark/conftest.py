"""One local[2] Spark session shared by the Spark integration tests of this process."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A quiet local[2] session (AQE is switched off per job by flintlock itself)."""
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
        .getOrCreate()
    )
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here runs real Spark jobs: mark them slow."""
    for item in items:
        if "tests/spark/" in item.nodeid:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def ship_test_module_by_value(request: pytest.FixtureRequest) -> None:
    """Functions defined in a test module travel by value: workers cannot import tests."""
    from pyspark import cloudpickle

    module = request.module
    if module.__name__ not in cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES:
        cloudpickle.register_pickle_by_value(module)
