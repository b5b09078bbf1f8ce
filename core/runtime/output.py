"""Where an operator's batches and watermarks go: the next operator, or out of the task.

Inside a task, operators pass Arrow batches by reference through these outputs, with no
copy or framing; only the tail's output goes to the task's writer. An output is sealed
after its operator's finish (nothing may be emitted after it), by swapping its methods,
so the check costs nothing on the path before."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from flintlock.core.errors import EmitAfterFinishError, tag_operator
from flintlock.core.events import Watermark

if TYPE_CHECKING:
    from flintlock.core.api.side_outputs import OutputTag
    from flintlock.core.checkpoint.snapshots import TaskAcknowledgement
    from flintlock.core.hooks.runner import HookRunner
    from flintlock.core.runtime.operator import StreamOperator
    from flintlock.core.task_info import TaskInfo


class Output:
    """Emits an operator's results downstream; sealed once the operator finished."""

    owner = "?"
    takes_rows = False
    """True if the next operator takes rows (dicts) as they are: see ``row_output.RowsOutput``."""
    _writer: RecordWriter | None = None
    _operator = "?"

    def emit(self, batch: pa.RecordBatch) -> None:
        """Send a batch to the next operator (or out of the task)."""
        raise NotImplementedError

    def bind_side_outputs(self, writer: RecordWriter, operator: str) -> None:
        """Side outputs of ``operator`` leave the task through ``writer`` (never chained)."""
        self._writer, self._operator = writer, operator

    def emit_side(self, tag: OutputTag, batch: pa.RecordBatch) -> None:
        """Send a batch to side output ``tag``: out of the task, to whoever reads it."""
        if self._writer is None:
            raise RuntimeError(f"operator '{self._operator}': side outputs are not wired")
        self._writer.emit_side(self._operator, tag.name, batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        """Send a watermark to the next operator (or out of the task)."""
        raise NotImplementedError

    def emit_watermark_status(self, idle: bool) -> None:
        """Say the operator's output became idle (or active again), Flink's WatermarkStatus."""
        raise NotImplementedError

    def seal(self, owner: str) -> None:
        """After ``owner``'s finish(): any further emit raises. Costs nothing before."""
        self.owner = owner
        self.emit = self._emit_after_finish  # type: ignore[method-assign,assignment]
        self.emit_watermark = self._emit_after_finish  # type: ignore[method-assign,assignment]
        self.emit_side = self._emit_after_finish  # type: ignore[method-assign,assignment]
        self.emit_watermark_status = self._emit_after_finish  # type: ignore[method-assign,assignment]

    def _emit_after_finish(self, *_items: object) -> None:
        raise EmitAfterFinishError(
            f"operator '{self.owner}' emitted after its finish() returned; "
            f"flush everything in finish()"
        )


class RecordWriter(Protocol):
    """The task's way out: batches, watermarks, end of input and acknowledgements."""

    def emit_batch(self, batch: pa.RecordBatch) -> None:
        """A batch leaves the task."""

    def emit_watermark(self, watermark: Watermark) -> None:
        """A watermark leaves the task."""

    def emit_side(self, operator: str, tag: str, batch: pa.RecordBatch) -> None:
        """A batch of ``operator``'s side output ``tag`` leaves the task."""

    def emit_watermark_status(self, idle: bool) -> None:
        """The task's output became idle, or active again."""

    def end_of_input(self) -> None:
        """The task's output has ended for good (its input ended and it finished)."""

    def acknowledge(self, acknowledgement: TaskAcknowledgement) -> None:
        """The epoch's snapshot is written: forward the acknowledgement."""

    def report_phases(self, task: TaskInfo, phases: dict[str, list[float]]) -> None:
        """After close: each lifecycle phase's [start, end] (wall clock), for the driver."""


class ChainingOutput(Output):
    """Hands batches straight to the next operator of the chain, by reference."""

    def __init__(self, target: StreamOperator, hooks: HookRunner, task: TaskInfo) -> None:
        self.target = target
        self.rows = 0
        """Rows handed to ``target`` (its numRecordsIn), counted per batch."""
        process: Callable[[pa.RecordBatch], None] = target.process_batch  # type: ignore[attr-defined]
        watermark: Callable[[Watermark], None] = target.process_watermark
        if hooks.implemented("flintlock_operator_process_batch"):

            def traced_process(batch: pa.RecordBatch, _step: Callable[..., None] = process) -> None:
                hooks.around(
                    "flintlock_operator_process_batch",
                    lambda: _step(batch),
                    operator=target,
                    task=task,
                    batch=batch,
                    input_index=1,
                )

            process = traced_process

        if hooks.implemented("flintlock_operator_process_watermark"):

            def traced_watermark(mark: Watermark, _step: Callable[..., None] = watermark) -> None:
                hooks.around(
                    "flintlock_operator_process_watermark",
                    lambda: _step(mark, 1),
                    operator=target,
                    task=task,
                    watermark=mark,
                    input_index=1,
                )

            watermark = traced_watermark

        self._process = process
        self._watermark = watermark

    def emit(self, batch: pa.RecordBatch) -> None:
        self.rows += batch.num_rows
        try:
            self._process(batch)
        except BaseException as error:
            tag_operator(error, self.target.name, "process_batch")
            raise

    def emit_watermark(self, watermark: Watermark) -> None:
        try:
            self._watermark(watermark)
        except BaseException as error:
            tag_operator(error, self.target.name, "process_watermark")
            raise

    def emit_watermark_status(self, idle: bool) -> None:
        try:
            self.target.process_watermark_status(idle, 1)
        except BaseException as error:
            tag_operator(error, self.target.name, "process_watermark_status")
            raise


class TaskOutput(Output):
    """The tail operator's output: hands batches and watermarks to the task's writer."""

    def __init__(self, writer: RecordWriter) -> None:
        self.emit = writer.emit_batch  # type: ignore[method-assign]
        self.emit_watermark = writer.emit_watermark  # type: ignore[method-assign]
        self.emit_watermark_status = writer.emit_watermark_status  # type: ignore[method-assign]


class HeadInputOutput(Output):
    """A chained source's output (FLIP-182): batches, watermarks and statuses go into one
    input of the task's head (``input_index``), as an exchanged input's would."""

    def __init__(
        self,
        input_index: int,
        process: Callable[[pa.RecordBatch, int], None],
        watermark: Callable[[Watermark, int], None],
        status: Callable[[bool, int], None],
    ) -> None:
        self.input_index = input_index
        self._process, self._watermark, self._status = process, watermark, status

    def emit(self, batch: pa.RecordBatch) -> None:
        self._process(batch, self.input_index)

    def emit_watermark(self, watermark: Watermark) -> None:
        self._watermark(watermark, self.input_index)

    def emit_watermark_status(self, idle: bool) -> None:
        self._status(idle, self.input_index)
