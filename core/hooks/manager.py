"""Finds plugins through entry points and gives each task and job its plugin manager.

Entry points (group ``flintlock``) are loaded once per process. A task or job handed
plugin objects gets a fresh manager from the installed plugins plus those, so nothing
registered for one job or test leaks into the next; one handed none shares the process's
manager of the installed plugins alone (``plugins_for``), which holds nothing of any job.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import pluggy

from flintlock.core.errors import PluginError
from flintlock.core.hooks import specs as hookspecs
from flintlock.core.hooks.registry import Registry, build_registry

ENTRY_POINT_GROUP = "flintlock"
hookimpl = pluggy.HookimplMarker(hookspecs.PROJECT)
"""Mark a function or method as an implementation of a flintlock hook."""

TRACE_ENV = "FLINTLOCK_TRACE_HOOKS"


@dataclass(frozen=True)
class InstalledPlugin:
    """A plugin found through an entry point: its name, object and distribution."""

    name: str
    plugin: Any
    distribution: str


@functools.cache
def installed_plugins() -> tuple[InstalledPlugin, ...]:
    """Load every ``flintlock`` entry point once per process, in name order."""
    found = []
    for entry_point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            plugin = entry_point.load()
        except Exception as error:
            raise PluginError(
                f"cannot load flintlock plugin '{entry_point.name}' "
                f"({entry_point.value}): {type(error).__name__}: {error}"
            ) from error
        dist = entry_point.dist.name if entry_point.dist is not None else "?"
        found.append(InstalledPlugin(entry_point.name, plugin, dist))
    return tuple(found)


@functools.cache
def _installed_ids() -> frozenset[int]:
    return frozenset(id(installed.plugin) for installed in installed_plugins())


_installed_hook_options: dict[tuple[int, str], Any] = {}


class _PluginManager(pluggy.PluginManager):
    """Remembers which attributes of the installed plugins (loaded once per process and
    kept) are hook implementations: each task builds a manager, and scanning every
    installed plugin's attributes again was most of its cost (bench/RESULTS.md, "Fixed
    cost per job and per epoch")."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if id(plugin) not in _installed_ids():
            return super().parse_hookimpl_opts(plugin, name)
        key = (id(plugin), name)
        if key not in _installed_hook_options:
            _installed_hook_options[key] = super().parse_hookimpl_opts(plugin, name)
        return _installed_hook_options[key]


def build_plugin_manager(
    plugins: Iterable[object] = (), *, use_entry_points: bool = True
) -> pluggy.PluginManager:
    """A fresh manager holding the installed plugins plus ``plugins`` (objects or modules)."""
    manager = _PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    if use_entry_points:
        for installed in installed_plugins():
            manager.register(installed.plugin, name=installed.name)
    for plugin in plugins:
        if manager.is_registered(plugin):
            continue
        manager.register(plugin)
    if os.environ.get(TRACE_ENV) == "1":
        _trace_hook_calls(manager)
    return manager


def plugins_for(plugins: Sequence[object]) -> tuple[pluggy.PluginManager, Registry]:
    """The manager and registry of a task or job handed ``plugins``: with none, the
    process's shared pair over the installed plugins (building its own was most of a
    subtask's start: bench/RESULTS.md, "The 1,000-row job on a new DataFrame"); else a
    fresh pair."""
    if not plugins:
        return _installed_only(os.environ.get(TRACE_ENV) == "1")
    manager = build_plugin_manager(plugins)
    return manager, build_registry(manager)


@functools.cache
def _installed_only(_traced: bool) -> tuple[pluggy.PluginManager, Registry]:
    """Built once per process and tracing setting; no one registers into it later."""
    manager = build_plugin_manager()
    return manager, build_registry(manager)


def _trace_hook_calls(manager: pluggy.PluginManager) -> None:
    """Print every hook call and its arguments to stderr (FLINTLOCK_TRACE_HOOKS=1)."""

    def before(hook_name: str, _impls: object, kwargs: Mapping[str, object]) -> None:
        shown = {k: getattr(v, "name", v) for k, v in kwargs.items() if k != "batch"}
        print(f"[flintlock hook] {hook_name} {shown}", file=sys.stderr)

    def after(*_args: object) -> None:
        return None

    manager.add_hookcall_monitoring(before, after)
    manager.flintlock_trace = True  # type: ignore[attr-defined]  # HookRunner: call every hook
