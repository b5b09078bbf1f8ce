"""Nexmark, the online-auction streaming benchmark, on flintlock: a generator source, the
queries as jobs, their check against DuckDB and the benchmark (``python -m bench.nexmark``)."""

from __future__ import annotations

import sys


def ship_to_workers() -> None:
    """Send this package's code to Spark's workers by value: they cannot import bench/."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
