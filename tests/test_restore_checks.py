"""Checks made before Spark starts: unique uids, a retention of at least one checkpoint,
and a restore path that holds a checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from flintlock import CheckpointError, GraphError, StreamExecutionEnvironment


def test_two_operators_with_one_uid_are_refused_naming_both() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    source = env.from_collection([{"v": 1}]).uid("x")
    source.map(lambda row: row, name="m").uid("x").print()
    with pytest.raises(GraphError, match="operators 'source:collection' and 'm' have the same uid"):
        env.execute("duplicate-uids")


def test_a_uid_is_a_non_empty_string() -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    with pytest.raises(GraphError, match="uid must be a non-empty string"):
        env.from_collection([{"v": 1}]).uid("")


def test_retained_checkpoints_is_at_least_one() -> None:
    with pytest.raises(GraphError, match="retained_checkpoints 0 must be an int >= 1"):
        StreamExecutionEnvironment(parallelism=1, retained_checkpoints=0)


def test_restoring_from_a_folder_without_a_checkpoint_names_it(tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=1, checkpoint_dir=str(tmp_path / "chk"))
    env.from_collection([{"v": 1}]).print()
    with pytest.raises(CheckpointError, match=f"{tmp_path} is neither a checkpoint"):
        env.execute("nothing-there", restore_from=str(tmp_path))
    (tmp_path / "job" / "checkpoints" / "chk-1").mkdir(parents=True)  # never completed
    with pytest.raises(CheckpointError, match=r"job folder .*/job holds no completed checkpoint"):
        env.execute("nothing-there", restore_from=str(tmp_path / "job"))
