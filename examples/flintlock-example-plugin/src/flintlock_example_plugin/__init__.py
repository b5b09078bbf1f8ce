"""An example third-party flintlock plugin: the ``dedupe`` operator, the
``counting-one-input`` task type, the ``key-group-dicts`` state backend and the ``jsonl``
two-phase-commit sink.

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
from flintlock_example_plugin.jsonl_sink import JsonLinesSink
from flintlock_example_plugin.key_group_backend import KeyGroupStateBackend

__all__ = [
    "COUNTING_TASK_TYPE",
    "DEDUPE_OPERATOR",
    "JSONL_SINK",
    "STATE_BACKEND",
    "CountingOneInputStreamTask",
    "DedupeOperator",
    "JsonLinesSink",
    "KeyGroupStateBackend",
    "flintlock_register_operators",
    "flintlock_register_sinks",
    "flintlock_register_state_backends",
    "flintlock_register_task_types",
]

DEDUPE_OPERATOR = "dedupe"
"""The name ``DedupeOperator`` is registered under (``DataStream.transform(..., "dedupe")``)."""

COUNTING_TASK_TYPE = "counting-one-input"
"""The name ``CountingOneInputStreamTask`` is registered under (a harness's ``task_type``)."""


STATE_BACKEND = "key-group-dicts"
"""The name ``KeyGroupStateBackend`` is registered under (``state_backend=...``)."""

JSONL_SINK = "jsonl"
"""The name ``JsonLinesSink`` is registered under."""


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    """Offer the ``dedupe`` operator."""
    register(DEDUPE_OPERATOR, DedupeOperator)


@hookimpl
def flintlock_register_task_types(register: Callable[[str, Any], None]) -> None:
    """Offer the ``counting-one-input`` task type."""
    register(COUNTING_TASK_TYPE, CountingOneInputStreamTask)


@hookimpl
def flintlock_register_state_backends(register: Callable[[str, Any], None]) -> None:
    """Offer the ``key-group-dicts`` state backend."""
    register(STATE_BACKEND, KeyGroupStateBackend)


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    """Offer the ``jsonl`` two-phase-commit sink."""
    register(JSONL_SINK, JsonLinesSink)
