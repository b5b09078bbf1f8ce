"""Plugin reports from the workers to the driver, through two hooks: on the worker,
``flintlock_report_to_driver`` asks each plugin object the job was handed what it
observed in the task; on the driver, ``flintlock_merge_report`` hands that to the same
plugin object. Reports travel as JSON, once per subtask and epoch, never per batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from flintlock.core.errors import PluginError
from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import call_on
from flintlock.core.task_info import TaskInfo


@dataclass(frozen=True)
class PluginReport:
    """What the job's plugin at ``plugin`` (its place in the job's plugin list) observed
    in the subtask ``task`` (``TaskInfo.key``): JSON the plugin chose."""

    plugin: int
    task: str
    data: Any

    def to_json(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "task": self.task, "data": self.data}

    @classmethod
    def from_json(cls, document: Any) -> PluginReport:
        """The report a REPORT message carries; a damaged one is a PluginError."""
        try:
            return cls(int(document["plugin"]), str(document["task"]), document["data"])
        except (KeyError, TypeError, ValueError) as error:
            raise PluginError(f"a damaged plugin report ({error}): {document!r:.300}") from None


def reports_to_driver(
    manager: pluggy.PluginManager, plugins: Sequence[object], task: TaskInfo
) -> list[PluginReport]:
    """One report per job plugin with something to report about ``task``: the plugin's
    place in the job's plugin list, the subtask's key and the data."""
    reports = []
    for index, plugin in enumerate(plugins):
        data = call_on(manager, "flintlock_report_to_driver", plugin, task=task)
        if data is not None:
            reports.append(PluginReport(index, task.key, data))
    return reports


def merge_reports(plugins: Sequence[object], reports: Sequence[PluginReport]) -> None:
    """Hand each report to the job plugin that made it (``reports_to_driver``'s index)."""
    if not reports:
        return
    manager = build_plugin_manager(plugins, use_entry_points=False)
    for report in reports:
        call_on(
            manager,
            "flintlock_merge_report",
            plugins[report.plugin],
            task=report.task,
            report=report.data,
        )
