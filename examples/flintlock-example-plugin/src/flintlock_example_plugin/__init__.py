"""An example third-party flintlock plugin: the ``dedupe`` operator and the
``counting-one-input`` task type.

flintlock finds this module through the entry point ``example`` in the group
``flintlock`` (see this distribution's ``pyproject.toml``) and registers the hook
implementations below in every task's plugin manager, exactly like its own plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flintlock import hookimpl
from flintlock_example_plugin.counting_task import CountingOneInputStreamTask
from flintlock_example_plugin.dedupe import DedupeOperator

__all__ = [
    "COUNTING_TASK_TYPE",
    "DEDUPE_OPERATOR",
    "CountingOneInputStreamTask",
    "DedupeOperator",
    "flintlock_register_operators",
    "flintlock_register_task_types",
]

DEDUPE_OPERATOR = "dedupe"
"""The name ``DedupeOperator`` is registered under (``DataStream.transform(..., "dedupe")``)."""

COUNTING_TASK_TYPE = "counting-one-input"
"""The name ``CountingOneInputStreamTask`` is registered under (a harness's ``task_type``)."""


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    """Offer the ``dedupe`` operator."""
    register(DEDUPE_OPERATOR, DedupeOperator)


@hookimpl
def flintlock_register_task_types(register: Callable[[str, Any], None]) -> None:
    """Offer the ``counting-one-input`` task type."""
    register(COUNTING_TASK_TYPE, CountingOneInputStreamTask)
