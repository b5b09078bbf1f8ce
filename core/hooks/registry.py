"""Task types, state backends, operators, sinks and sources offered by plugins, by name.

core never imports plugins/, operators/ or sinks/: it finds even ``map`` by the name a
plugin registered it under. Each plugin's registration hook is called on its own with a
``register`` callback, so naming checks and duplicates (naming both plugins) are handled
in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pluggy

from flintlock.core.errors import PluginError

KINDS = {
    "task type": "flintlock_register_task_types",
    "state backend": "flintlock_register_state_backends",
    "operator": "flintlock_register_operators",
    "sink": "flintlock_register_sinks",
    "source": "flintlock_register_sources",
}


@dataclass(frozen=True)
class Registered:
    """One named thing a plugin offers, and which plugin offered it."""

    name: str
    value: Any
    plugin_name: str


@dataclass
class Registry:
    """What the plugins of one manager offer, by kind and name."""

    entries: dict[str, dict[str, Registered]] = field(default_factory=dict)

    def get(self, kind: str, name: str) -> Any:
        """The object registered as ``name`` of ``kind``; a clear error if none is."""
        found = self.entries.get(kind, {}).get(name)
        if found is None:
            known = ", ".join(sorted(self.entries.get(kind, {}))) or "none"
            raise PluginError(
                f"no {kind} named '{name}' is registered (known: {known}); install the "
                f"plugin that provides it or hand its plugin object to the job"
            )
        return found.value

    def names(self, kind: str) -> list[str]:
        """Registered names of ``kind``, sorted."""
        return sorted(self.entries.get(kind, {}))

    def describe(self, kind: str) -> list[Registered]:
        """Every entry of ``kind`` with the plugin that offered it, sorted by name."""
        return [self.entries.get(kind, {})[name] for name in self.names(kind)]


def build_registry(manager: pluggy.PluginManager) -> Registry:
    """Call each registration hook per plugin, so duplicates can name both plugins."""
    registry = Registry()
    for kind, hook_name in KINDS.items():
        table: dict[str, Registered] = registry.entries.setdefault(kind, {})
        for impl in getattr(manager.hook, hook_name).get_hookimpls():
            register = _register_into(table, kind, impl.plugin_name)
            call_on(manager, hook_name, impl.plugin, register=register)
    return registry


def call_on(manager: pluggy.PluginManager, hook_name: str, plugin: object, **kwargs: Any) -> Any:
    """Call hook ``hook_name`` on ``plugin`` alone, through ``manager`` (pluggy's subset
    hook caller), so the call and its result are known to be that plugin's."""
    others = manager.get_plugins() - {plugin}
    return manager.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)


def _register_into(table: dict[str, Registered], kind: str, plugin_name: str) -> Any:
    def register(name: str, value: Any) -> None:
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin '{plugin_name}' registered a {kind} without a name")
        if name in table:
            raise PluginError(
                f"{kind} '{name}' is offered twice: by plugin '{table[name].plugin_name}' "
                f"and by plugin '{plugin_name}'"
            )
        table[name] = Registered(name, value, plugin_name)

    return register
