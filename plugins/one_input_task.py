"""The one-input task type: a chain fed by one input's channels.

All the channel reading is InputStreamTask's, shared with the two-input type; this
plugin only names the task type and its head operator type, registered through the
same entry point a third party's task type would use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flintlock import OneInputStreamOperator, hookimpl
from flintlock.plugin_api import InputStreamTask


class OneInputStreamTask(InputStreamTask):
    """Runs a chain whose head is a one-input operator."""

    task_type = "one-input"
    head_operator_type = OneInputStreamOperator
    num_inputs = 1


@hookimpl
def flintlock_register_task_types(register: Callable[[str, Any], None]) -> None:
    register("one-input", OneInputStreamTask)
