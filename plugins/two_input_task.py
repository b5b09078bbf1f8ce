"""The two-input task type: both inputs arrive as channels tagged with the input index.

On Spark both inputs come through one exchange and their channels interleave, so the
inputs end in no fixed order: end_input(1) and end_input(2) follow the order they really
end, and finish only after both, with the channel reading shared with the one-input type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flintlock import TwoInputStreamOperator, hookimpl
from flintlock.plugin_api import InputStreamTask


class TwoInputStreamTask(InputStreamTask):
    """Runs a chain whose head is a two-input operator; end_input(1) and end_input(2)
    reach it in the order the inputs really end, finish only after both."""

    task_type = "two-input"
    head_operator_type = TwoInputStreamOperator
    num_inputs = 2


@hookimpl
def flintlock_register_task_types(register: Callable[[str, Any], None]) -> None:
    register("two-input", TwoInputStreamTask)
