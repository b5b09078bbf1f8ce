"""The third-party example plugin (examples/flintlock-example-plugin), as installed by CI:
found through its entry point, its operator and task type looked up by name, run."""

from __future__ import annotations

import logging
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from flintlock import StreamExecutionEnvironment
from flintlock.core.hooks.manager import build_plugin_manager, installed_plugins
from flintlock.core.hooks.registry import build_registry
from flintlock.plugins.one_input_task import OneInputStreamTask
from flintlock.testing import OneInputHarness

DISTRIBUTION = "flintlock-example-plugin"
OPERATOR = "dedupe"
TASK_TYPE = "counting-one-input"


def rows(*pairs: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"k": k, "v": v} for k, v in pairs]


def dedupe(**kwargs: Any) -> Any:
    """A dedupe operator built from the registry by name, as a job would build it."""
    factory = build_registry(build_plugin_manager()).get("operator", OPERATOR)
    return factory(key_column="k", **kwargs)


def test_the_plugin_is_an_installed_entry_point_of_its_own_distribution() -> None:
    (found,) = entry_points(group="flintlock", name="example")
    assert found.value == "flintlock_example_plugin"
    assert found.dist is not None and found.dist.name == DISTRIBUTION
    by_name = {p.name: p for p in installed_plugins()}
    assert by_name["example"].distribution == DISTRIBUTION
    assert by_name["example"].plugin.__name__ == "flintlock_example_plugin"


def test_the_registry_finds_the_operator_and_the_task_type_by_name() -> None:
    registry = build_registry(build_plugin_manager())
    assert OPERATOR in registry.names("operator")
    assert TASK_TYPE in registry.names("task type")
    offered = {
        (kind, entry.name): entry.plugin_name
        for kind in ("operator", "task type")
        for entry in registry.describe(kind)
    }
    assert offered[("operator", OPERATOR)] == "example"
    assert offered[("task type", TASK_TYPE)] == "example"
    task_class = registry.get("task type", TASK_TYPE)
    assert issubclass(task_class, OneInputStreamTask)
    assert task_class.__module__.startswith("flintlock_example_plugin")
    assert registry.get("operator", OPERATOR).__module__.startswith("flintlock_example_plugin")


def test_dedupe_in_the_counting_task_remembers_keys_across_a_restore(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = OneInputHarness(dedupe(), task_type=TASK_TYPE)
    assert type(first.task).task_type == TASK_TYPE
    first.process_records(rows(("a", 1), ("b", 2), ("a", 3)))
    first.process_records(rows(("c", 4), ("b", 5)))
    assert first.output_rows() == rows(("a", 1), ("b", 2), ("c", 4))
    with caplog.at_level(logging.INFO, logger="flintlock_example_plugin"):
        snapshot = first.checkpoint(1)
    assert (first.task.batches_processed, first.task.records_processed) == (2, 5)
    assert "task dedupe#0 processed 5 records in 2 batches" in caplog.messages
    dedupe_state = snapshot.operator(OPERATOR)
    assert dedupe_state is not None and [f.name for f in dedupe_state.keyed] == ["seen"]

    restored = OneInputHarness(dedupe(), task_type=TASK_TYPE, restore_from=snapshot)
    restored.process_records(rows(("b", 6), ("d", 7), ("a", 8)))
    restored.process_records(rows(("d", 9), ("c", 10)))
    restored.process_records(rows(("e", 11)))
    restored.complete(2)
    assert restored.output_rows() == rows(("d", 7), ("e", 11))
    assert (restored.task.batches_processed, restored.task.records_processed) == (3, 6)


def test_flintlock_plugins_lists_both_names_with_the_distribution() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flintlock.cli", "plugins"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed: set[tuple[str, str, str, str]] = set()
    kind = ""
    for line in done.stdout.splitlines():
        if not line.startswith(" "):
            kind = line.rstrip(":")
            continue
        name, distribution, plugin = line.split()
        listed.add((kind, name, distribution, plugin))
    assert ("task types", TASK_TYPE, DISTRIBUTION, "(example)") in listed
    assert ("operators", OPERATOR, DISTRIBUTION, "(example)") in listed


def test_dedupe_by_name_in_the_counting_task_type_on_spark(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=str(tmp_path / "chk")
    )
    records = [{"k": f"user-{i % 7}", "v": i} for i in range(40)]
    table = (
        env.from_collection(records, batch_size=6)
        .key_by("k")
        .transform("dedupe", OPERATOR, key_column="k")
        .set_task_type(TASK_TYPE)  # both found by name, from the installed plugin
        .execute_and_collect("dedupe-job")
    )
    got = sorted(table.to_pylist(), key=lambda row: row["k"])
    assert [row["k"] for row in got] == [f"user-{i}" for i in range(7)]  # each key once
    assert all(row["k"] == f"user-{row['v'] % 7}" for row in got)  # a row of that key
