"""The harness of each task type: one-input, two-input, multiple-input (with sources
chained into it) and source tasks, over ``TaskHarness`` (``core/testing.py``)."""

from __future__ import annotations

from typing import Any

from flintlock.core.api.functions import Row
from flintlock.core.checkpoint.snapshots import TaskSnapshot
from flintlock.core.events import CheckpointBarrier
from flintlock.core.runtime.operator import StreamOperator
from flintlock.core.sources.source import Source, SourceEpoch, SourceOperator
from flintlock.core.testing import TaskHarness, as_source_operator


class OneInputHarness(TaskHarness):
    """A one-input task: ``OneInputHarness(op1, op2, ...)`` chains the operators."""

    task_type = "one-input"


class TwoInputHarness(TaskHarness):
    """A two-input task: the head takes inputs 1 and 2; feed with ``input_index``."""

    task_type = "two-input"

    def _default_channels(self) -> dict[int, int]:
        return {1: 1, 2: 1}


class MultipleInputHarness(TaskHarness):
    """A multiple-input task: ``MultipleInputHarness(op, ...)`` whose head takes inputs
    1..``op.num_inputs`` (one channel each unless ``input_channels`` says otherwise).

    ``chained_sources={i: source}`` reads input ``i`` from a source inside the task
    (a ready ``SourceOperator``, or a ``Source`` or list of rows, then named
    ``source:<name>:input<i>``); the others are fed as exchanged inputs."""

    task_type = "multiple-input"

    def _default_channels(self) -> dict[int, int]:
        inputs = range(1, self.operators[0].num_inputs + 1)
        return {i: 1 for i in inputs if i not in self.chained_sources}


class SourceHarness(TaskHarness):
    """A source task: reads its source to the end, MAX_WATERMARK, finish, final checkpoint.

    ``SourceHarness(source, op2, ...)``: the source (a ``Source`` or a ready
    ``SourceOperator``) heads the chain; ``run()`` runs the whole epoch. An unbounded
    source reads one epoch: ``source_epoch=SourceEpoch(splits, ends_input)``, with
    ``final=False`` for an epoch the job outlives (the barrier is not the final one).
    """

    task_type = "source"

    def __init__(
        self,
        source: Source | SourceOperator | list[Row],
        *operators: StreamOperator,
        checkpoint_id: int = 1,
        source_epoch: SourceEpoch | None = None,
        final: bool = True,
        **kwargs: Any,
    ) -> None:
        head = as_source_operator(source)
        if source_epoch is not None:
            head.epoch = source_epoch
        self._checkpoint_id = checkpoint_id
        self._final = final
        super().__init__(head, *operators, **kwargs)

    def _default_channels(self) -> dict[int, int]:
        return {}

    def _epoch_barrier(self) -> CheckpointBarrier:
        return CheckpointBarrier(self._checkpoint_id, final=self._final)

    def run(self) -> TaskSnapshot:
        """Run the source task's whole epoch; returns its final snapshot."""
        self.open()
        return self._snapshot()
