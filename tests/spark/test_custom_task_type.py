"""A task type registered by a plugin object runs a vertex on Spark (``set_task_type``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from flintlock import PluginError, StreamExecutionEnvironment, hookimpl
from flintlock.plugins.one_input_task import OneInputStreamTask


class MarkingTask(OneInputStreamTask):
    """A one-input task that leaves a marker file per subtask in ``folder`` at cleanup."""

    task_type = "marking-one-input"

    def __init__(self, environment: Any, registry: Any, folder: str) -> None:
        super().__init__(environment, registry)
        self.folder = Path(folder)

    def task_cleanup(self) -> None:
        super().task_cleanup()
        info = self.info
        (self.folder / f"{info.task_type}-{info.task_name}-{info.subtask_index}").touch()


class MarkingTaskPlugin:
    """Hands the task type to one job; the folder travels with the plugin to the workers."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @hookimpl
    def flintlock_register_task_types(self, register: Callable[[str, Any], None]) -> None:
        register("marking-one-input", partial(MarkingTask, folder=self.folder))


def test_a_plugin_task_type_runs_its_vertex_on_spark(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(
        parallelism=2,
        spark=spark,
        checkpoint_dir=str(tmp_path / "c"),
        plugins=[MarkingTaskPlugin(str(tmp_path))],
    )

    def tag(batch: Any) -> Any:
        return batch

    stream = env.from_collection([{"v": i} for i in range(50)], batch_size=10)
    marked = stream.map_batch(tag, name="tag").set_task_type("marking-one-input")
    table = marked.map(lambda row: {"v": row["v"] + 1}, name="inc").execute_and_collect("marking")

    assert sorted(table.column("v").to_pylist()) == list(range(1, 51))
    markers = sorted(p.name for p in tmp_path.glob("marking-*"))
    # 'tag' heads its own vertex (set_task_type); 'inc' and the sink chain to it
    chain = "tag -> inc -> collect"
    assert markers == [f"marking-one-input-{chain}-0", f"marking-one-input-{chain}-1"]


def test_an_unknown_task_type_is_named_when_the_program_is_built(tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=1, checkpoint_dir=str(tmp_path))
    stream = env.from_collection([{"v": 1}]).map(lambda row: row)
    with pytest.raises(PluginError, match=r"no task type named 'nope'.*one-input"):
        stream.set_task_type("nope")
