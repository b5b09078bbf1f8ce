"""Plugin reports from the workers to the driver, through two hooks: on the worker,
``flintlock_report_to_driver`` asks each plugin object the job was handed what it
observed in the task; on the driver, ``flintlock_merge_report`` hands that to the same
plugin object. Reports travel as JSON, once per subtask and epoch, never per batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pluggy

from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import call_on
from flintlock.core.task_info import TaskInfo


def reports_to_driver(
    manager: pluggy.PluginManager, plugins: Sequence[object], task: TaskInfo
) -> list[dict[str, Any]]:
    """One document per job plugin with something to report about ``task``: the plugin's
    place in the job's plugin list, the subtask's key and the data."""
    documents = []
    for index, plugin in enumerate(plugins):
        data = call_on(manager, "flintlock_report_to_driver", plugin, task=task)
        if data is not None:
            documents.append({"plugin": index, "task": task.key, "data": data})
    return documents


def merge_reports(plugins: Sequence[object], documents: Sequence[dict[str, Any]]) -> None:
    """Hand each report to the job plugin that made it (``reports_to_driver``'s index)."""
    if not documents:
        return
    manager = build_plugin_manager(plugins, use_entry_points=False)
    for document in documents:
        plugin = plugins[document["plugin"]]
        call_on(
            manager,
            "flintlock_merge_report",
            plugin,
            task=document["task"],
            report=document["data"],
        )
