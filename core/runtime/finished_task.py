"""A finished subtask in a later epoch (FLIP-147): of a fully finished vertex, or one
that finished alone while its siblings go on (``core/checkpoint/finished_subtasks.py``).

Its operators finished in an earlier checkpoint and get no call at all: the Spark
partition only tells downstream that this output ended (MAX_WATERMARK, END_OF_INPUT),
waits for the barrier on its own inputs, and acknowledges the checkpoint as finished
with empty state (as Flink records finished subtasks), naming the checkpoint it
finished in, so every checkpoint stays complete and restorable.
"""

from __future__ import annotations

import time

from flintlock.core.checkpoint.snapshots import TaskAcknowledgement
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import ChannelError
from flintlock.core.events import (
    MAX_WATERMARK,
    CheckpointBarrier,
    EndOfInputEvent,
    ProcessingTimeTick,
    WatermarkEvent,
    WatermarkStatusEvent,
)
from flintlock.core.exchange.input_gate import InputGate
from flintlock.core.exchange.reader import MessageReader
from flintlock.core.exchange.writer import MessageWriter
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.plan.graph import JobVertex
from flintlock.core.runtime.task import write_manifest
from flintlock.core.task_info import TaskInfo

_PASSED_OVER = (WatermarkEvent, WatermarkStatusEvent, ProcessingTimeTick)


def run_finished_subtask(
    plan: ExecutionPlan,
    vertex: JobVertex,
    info: TaskInfo,
    writer: MessageWriter,
    reader: MessageReader | None,
) -> None:
    """Forward the end of this subtask's output and the barrier; acknowledge as finished."""
    started = time.perf_counter()
    writer.emit_watermark(MAX_WATERMARK)
    writer.end_of_input()
    if reader is not None:
        _await_barrier(vertex, info, reader, vertex.channels_per_input(plan.vertices))
    barrier = plan.barrier
    storage = CheckpointStorage.from_uri(plan.checkpoint_uri, plan.storage_options)
    directory = storage.task_snapshot_dir(info, barrier.checkpoint_id, plan.snapshot_root)
    snapshot, manifest, size = write_manifest(
        storage,
        info,
        barrier,
        directory,
        final=barrier.final,
        operators={},
        ended_inputs=sorted(vertex.channels_per_input(plan.vertices)),
        finished_at=plan.finished_at(vertex.name, info.subtask_index),
    )
    writer.acknowledge(
        TaskAcknowledgement(
            checkpoint_id=barrier.checkpoint_id,
            task_name=info.task_name,
            subtask_index=info.subtask_index,
            attempt_id=info.attempt_id,
            manifest_path=manifest,
            size_bytes=size,
            finished=True,
            finished_at=snapshot.finished_at,
            duration_seconds=time.perf_counter() - started,
        )
    )
    if reader is not None:
        reader.drain()


def _await_barrier(
    vertex: JobVertex, info: TaskInfo, reader: MessageReader, channels: dict[int, int]
) -> CheckpointBarrier:
    """Read the inputs up to the aligned barrier: only ends, watermarks and the barrier
    may come from upstream vertices that are themselves finished."""
    gate = InputGate(channels)
    for event in reader.events():
        if isinstance(event, CheckpointBarrier):
            aligned = gate.on_barrier(event)
            if aligned is not None:
                return aligned
        elif isinstance(event, EndOfInputEvent):
            gate.on_end_of_input(event.input_index, event.channel)
        elif not isinstance(event, _PASSED_OVER):
            raise ChannelError(
                f"{type(event).__name__} arrived for subtask {info.subtask_index} of "
                f"'{vertex.name}', which finished in an earlier epoch: everything upstream "
                f"of a finished vertex has finished too"
            )
    raise ChannelError(
        f"the input of finished subtask {info.subtask_index} of '{vertex.name}' stopped "
        f"before the barrier"
    )
