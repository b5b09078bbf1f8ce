"""Runs a lifecycle step inside the plugins that wrap or observe it; free when none do.

Every lifecycle step runs inside its hook, per batch too, so a hook that no plugin
implements must cost nothing: the implemented hooks are read once per task (its manager
is complete before it starts), and a step whose hook nobody implements is called directly
after one set lookup, without a pluggy call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pluggy

T = TypeVar("T")


class HookRunner:
    """Calls lifecycle hooks around steps, skipping hooks that no plugin implements.

    The set of implemented hooks is read once: a task's manager is complete before the
    task starts, so the check on the hot path is one set lookup.
    """

    def __init__(self, manager: pluggy.PluginManager) -> None:
        self.manager = manager
        trace_all = getattr(manager, "flintlock_trace", False)
        self.in_use: frozenset[str] = frozenset(
            name
            for name, caller in vars(manager.hook).items()
            if isinstance(caller, pluggy.HookCaller) and (trace_all or caller.get_hookimpls())
        )

    def implemented(self, hook_name: str) -> bool:
        """True if some plugin implements ``hook_name``."""
        return hook_name in self.in_use

    def around(self, hook_name: str, step: Callable[[], T], **kwargs: Any) -> T:
        """Run ``step`` inside the implementations of ``hook_name``, or alone if none."""
        if hook_name not in self.in_use:
            return step()
        result: list[T] = []
        getattr(self.manager.hook, hook_name).call_extra([lambda: result.append(step())], kwargs)
        if not result:
            raise RuntimeError(f"a plugin wrapping {hook_name} did not run the step")
        return result[0]

    def notify(self, hook_name: str, **kwargs: Any) -> None:
        """Call an observation hook (no step of its own), if implemented."""
        if hook_name in self.in_use:
            getattr(self.manager.hook, hook_name)(**kwargs)
