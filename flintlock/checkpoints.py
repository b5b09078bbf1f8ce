"""Inspect checkpoints and savepoints offline, without a job: ``flintlock checkpoints`` in
Python. Paths are a ``chk-<N>`` folder, a savepoint, or a job's folder (its latest).

Checkpoints are plain Arrow IPC and JSON files, so they read without Spark or the job's
code; this module gathers the readers of core/checkpoint/ under one public name, as
``flintlock checkpoints`` does on the command line (CONTRIBUTING.md, "Read a checkpoint
offline")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flintlock.core.checkpoint.reader import (
    Checkpoint,
    CheckpointSummary,
    OperatorInfo,
    list_checkpoints,
    load_checkpoint,
)
from flintlock.core.checkpoint.restore import rescale
from flintlock.core.checkpoint.state_reader import describe, read_state, read_timers

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "Checkpoint",
    "CheckpointSummary",
    "OperatorInfo",
    "describe",
    "list_checkpoints",
    "load_checkpoint",
    "read_state",
    "read_state_dataframe",
    "read_timers",
    "rescale",
]


def read_state_dataframe(spark: SparkSession, path: str, operator: str, state: str) -> DataFrame:
    """``read_state`` as a Spark DataFrame (read on the driver: for inspection and tests)."""
    return spark.createDataFrame(read_state(path, operator, state))
