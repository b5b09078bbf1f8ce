"""Connectors whose library is an optional extra import it through ``require``, so a
missing install is one clear error naming the extra, not an ImportError deep in a task."""

from __future__ import annotations

import importlib
from types import ModuleType

from flintlock import PluginError


def require(module: str, extra: str, who: str) -> ModuleType:
    """Import ``module`` for ``who`` (e.g. ``"DeltaSink"``), or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise PluginError(
            f"{who} needs the {module.split('.')[0]} package: pip install 'flintlock[{extra}]'"
            f" ({error})"
        ) from error
