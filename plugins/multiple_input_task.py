"""The multiple-input task type (Flink's MultipleInputStreamTask): any number of inputs
arrive as channels of one exchange, tagged with their input index; each input ends on
its own (``end_input(i)`` in the order they really end) and ``finish`` follows the last."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flintlock import MultipleInputStreamOperator, hookimpl
from flintlock.plugin_api import InputStreamTask


class MultipleInputStreamTask(InputStreamTask):
    """Runs a chain whose head is a MultipleInputStreamOperator, over as many inputs as
    the head has (each with its channels)."""

    task_type = "multiple-input"
    head_operator_type = MultipleInputStreamOperator

    def task_init(self) -> None:
        self.num_inputs = self.chain.head.num_inputs  # the head says how many it reads
        super().task_init()


@hookimpl
def flintlock_register_task_types(register: Callable[[str, Any], None]) -> None:
    register("multiple-input", MultipleInputStreamTask)
