"""The test harness's task output: what a subtask emitted, kept in lists.

It is the task's RecordWriter, as the exchange's MessageWriter is on Spark, so a
harnessed task runs the real invoke and chain with only its output replaced; what would
have been framed as messages is kept for a test to assert on."""

from __future__ import annotations

import pyarrow as pa

from flintlock.core.checkpoint.snapshots import TaskAcknowledgement
from flintlock.core.events import Watermark
from flintlock.core.task_info import TaskInfo


class CollectingWriter:
    """The harness's task output: keeps batches, watermarks, end of input and acks."""

    def __init__(self) -> None:
        self.batches: list[pa.RecordBatch] = []
        self.watermarks: list[int] = []
        self.ended = False
        self.acknowledgements: list[TaskAcknowledgement] = []
        self.lifecycle_phases: list[dict[str, list[float]]] = []  # reported after close
        self.side_batches: dict[str, list[pa.RecordBatch]] = {}
        self.statuses: list[bool] = []
        self.records_out = 0  # the task's numRecordsOut, as the Spark task's writer counts

    def emit_batch(self, batch: pa.RecordBatch) -> None:
        self.records_out += batch.num_rows
        self.batches.append(batch)

    def emit_side(self, operator: str, tag: str, batch: pa.RecordBatch) -> None:
        self.side_batches.setdefault(tag, []).append(batch)

    def emit_watermark_status(self, idle: bool) -> None:
        self.statuses.append(idle)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.watermarks.append(watermark.timestamp)

    def end_of_input(self) -> None:
        self.ended = True

    def acknowledge(self, acknowledgement: TaskAcknowledgement) -> None:
        self.acknowledgements.append(acknowledgement)

    def report_phases(self, task: TaskInfo, phases: dict[str, list[float]]) -> None:
        self.lifecycle_phases.append(phases)
