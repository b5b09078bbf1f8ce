"""Test harnesses: run operators through the real StreamTask invoke and operator chain,
in-process, fed one call at a time. Only the input and the Spark context are replaced.

So a test checks the very lifecycle code that runs on Spark, in seconds and without
Spark: the task runs in a greenlet (``core/runtime/task_driver.py``) and the harness
hands it one event at a time, so a test can stop between any two steps and look."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock.core.api.functions import Row
from flintlock.core.api.side_outputs import OutputTag, check_tag
from flintlock.core.api.sink import CommitContext, TwoPhaseCommitSink
from flintlock.core.checkpoint.snapshots import TaskAcknowledgement, TaskRestore, TaskSnapshot
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import LifecycleError
from flintlock.core.events import (
    MAX_WATERMARK,
    CheckpointBarrier,
    DataEvent,
    EndOfInputEvent,
    ProcessingTimeTick,
    SnapshotKind,
    Watermark,
    WatermarkEvent,
    WatermarkStatusEvent,
)
from flintlock.core.harness_output import CollectingWriter
from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import build_registry
from flintlock.core.runtime.environment import TaskEnvironment
from flintlock.core.runtime.execution_state import ExecutionState
from flintlock.core.runtime.operator import StreamOperator
from flintlock.core.runtime.processing_time import Clock, ManualClock
from flintlock.core.runtime.task import StreamTask
from flintlock.core.runtime.task_driver import DrivenInput, TaskDriver
from flintlock.core.sources.source import CollectionSource, Source, SourceOperator
from flintlock.core.task_info import TaskInfo

CommT = TypeVar("CommT")
"""A sink's committable type (``StagedParquetFile`` for a FileSink)."""

_scratch: str | None = None


def _scratch_dir() -> str:
    """One temporary folder per process for harness snapshots, removed at exit."""
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix="flintlock-harness-")
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


class TaskHarness:
    """Runs one subtask of a chain of operators through the real invoke sequence.

    The task starts on the first call that needs it (or ``open()``): load, setup,
    initialize_state, open and — after a restore — the checkpoint notifications.
    ``checkpoint(n)`` ends the epoch as on Spark (snapshot, acknowledge, close); ``complete(n)``
    ends the input and takes the final checkpoint. Continue from a snapshot with a new
    harness: ``restore_from=snapshot``. Processing time is a ManualClock starting at 0
    (``set_processing_time``), unless ``clock`` is given; ``ttl_clock`` (e.g. a ``ManualClock``)
    is the processing time state TTL reads; ``snapshot_root`` (a folder on ``storage``) is
    where snapshots go, as a savepoint's; ``job_name``, ``run_id``, ``job_id`` and
    ``attempt_id`` say whose subtask it is (a sink names its staging after them);
    ``chained_sources={i: source}`` reads input ``i`` of a multiple-input head from a
    source inside the task (a ``Source``, ``SourceOperator`` or rows)."""

    task_type = "one-input"

    def __init__(
        self,
        *operators: StreamOperator,
        restore_from: TaskSnapshot | TaskRestore | None = None,
        aborted_checkpoints: Iterable[int] = (),
        plugins: Iterable[object] = (),
        parallelism: int = 1,
        subtask_index: int = 0,
        max_parallelism: int = 128,
        epoch: int | None = None,
        state_backend: str = "hashmap",
        storage: CheckpointStorage | None = None,
        task_name: str | None = None,
        task_type: str | None = None,
        input_channels: dict[int, int] | None = None,
        use_entry_points: bool = True,
        ttl_clock: Callable[[], int] | None = None,
        clock: Clock | None = None,
        snapshot_root: str | None = None,
        job_name: str = "harness",
        run_id: str = "local",
        job_id: str = "",
        attempt_id: int = 0,
        chained_sources: Mapping[int, Source | SourceOperator | list[Row]] | None = None,
    ) -> None:
        if not operators:
            raise ValueError("a harness needs at least one operator")
        self.chained_sources: dict[int, StreamOperator] = {
            i: as_source_operator(s, f"input{i}") for i, s in (chained_sources or {}).items()
        }
        self.operators = list(operators)
        self.restore = self._as_restore(restore_from, aborted_checkpoints)
        self.task_type = task_type or self.task_type
        manager = build_plugin_manager(plugins, use_entry_points=use_entry_points)
        registry = build_registry(manager)
        self.info = TaskInfo(
            task_name=task_name or " -> ".join(op.name for op in self.operators),
            task_type=self.task_type,
            subtask_index=subtask_index,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            epoch=epoch or (self.restore.checkpoint_id + 1 if self.restore else 1),
            job_name=job_name,
            run_id=run_id,
            job_id=job_id,
            attempt_id=attempt_id,
        )
        self.writer = CollectingWriter()
        self.clock = clock if clock is not None else ManualClock(0)
        self._input = DrivenInput()
        self.environment = TaskEnvironment(
            info=self.info,
            operators=self.operators,
            writer=self.writer,
            storage=storage or CheckpointStorage(pafs.LocalFileSystem(), _scratch_dir()),
            plugin_manager=manager,
            input=self._input,
            input_channels=input_channels or self._default_channels(),
            restore=self.restore,
            state_backend=state_backend,
            epoch_barrier=self._epoch_barrier(),
            chained_sources=self.chained_sources,
            ttl_clock=ttl_clock,
            clock=self.clock,
            snapshot_root=snapshot_root,
            records_in=None if self.task_type == "source" else self._input.records,
        )
        task_class: type[StreamTask] = registry.get("task type", self.task_type)
        self.task = task_class(self.environment, registry)
        self._driver = TaskDriver(self.task, self._input)
        self._started = False

    # ---- driving the task ----

    def open(self) -> TaskHarness:
        """Start the task: it runs up to the point where it waits for input."""
        if not self._started:
            self._started = True
            self._driver.start()
        return self

    def process_batch(
        self, batch: pa.RecordBatch | pa.Table, input_index: int = 1, channel: int = 0
    ) -> None:
        """Feed one batch (a table is fed batch by batch)."""
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for one in batches:
            self._send(DataEvent(one, input_index, channel))

    def process_records(
        self, rows: Sequence[Row], input_index: int = 1, schema: pa.Schema | None = None
    ) -> None:
        """Feed rows (dicts) as one batch."""
        self.process_batch(pa.RecordBatch.from_pylist(list(rows), schema=schema), input_index)

    def process_watermark(self, timestamp: int, input_index: int = 1, channel: int = 0) -> None:
        """Feed a watermark on one channel."""
        self._send(WatermarkEvent(Watermark(timestamp), input_index, channel))

    def process_watermark_status(self, idle: bool, input_index: int = 1, channel: int = 0) -> None:
        """Feed a watermark status: channel ``channel`` became idle (or active again)."""
        self._send(WatermarkStatusEvent(idle, input_index, channel))

    def set_processing_time(self, now: int) -> None:
        """Move the harness's ManualClock to ``now`` ms; due processing-time timers fire."""
        if not isinstance(self.clock, ManualClock):
            raise TypeError("set_processing_time needs the harness's ManualClock (clock=None)")
        self.clock.set(now)
        self._send(ProcessingTimeTick())

    def end_input(
        self, input_index: int = 1, max_watermark: bool = True, channel: int | None = None
    ) -> None:
        """End one input on all its channels (or on ``channel`` only: one upstream
        subtask finished), after MAX_WATERMARK as a source sends it."""
        count = self.environment.input_channels[input_index]
        for each in range(count) if channel is None else [channel]:
            if max_watermark:
                self._send(WatermarkEvent(MAX_WATERMARK, input_index, each))
            self._send(EndOfInputEvent(input_index, each))

    def checkpoint(self, checkpoint_id: int, kind: SnapshotKind = "checkpoint") -> TaskSnapshot:
        """End the epoch with checkpoint ``checkpoint_id``: snapshot, acknowledge, close."""
        self._barrier(CheckpointBarrier(checkpoint_id, kind=kind))
        return self._snapshot()

    def complete(self, checkpoint_id: int = 1, kind: SnapshotKind = "checkpoint") -> TaskSnapshot:
        """End every input still open and take the final checkpoint (FLIP-147), or with
        ``kind="savepoint"`` the savepoint of a stop with drain."""
        self.open()
        gate = getattr(self.task, "gate", None)
        if gate is not None:
            for input_index, count in gate.channels_per_input.items():
                for channel in range(count):
                    if not gate.channel_ended(input_index, channel):
                        self.end_input(input_index, channel=channel)
        self._barrier(CheckpointBarrier(checkpoint_id, kind, final=True))
        return self._snapshot()

    def cancel(self) -> LifecycleError:
        """Cancel the running task; returns the cancel error it ended with."""
        self.open()
        try:
            self._driver.cancel()
        except LifecycleError as error:
            if not error.canceled:
                raise
            return error
        raise AssertionError("the task did not end canceled")

    def commit(
        self, sink: TwoPhaseCommitSink[Any, CommT], operator_name: str | None = None
    ) -> list[CommT]:
        """Play the driver's committer: commit what the sink operator acknowledged.

        On Spark this runs on the driver once every subtask acknowledged the checkpoint;
        returns the committables that were committed."""
        acknowledgement = self.acknowledgement
        if acknowledgement is None:
            raise AssertionError("no acknowledgement yet: call checkpoint() or complete() first")
        names = [operator_name] if operator_name else list(acknowledgement.committables)
        if len(names) != 1:
            raise ValueError(f"name the sink operator, one of {names}")
        committables = acknowledgement.committables.get(names[0], [])
        context = CommitContext(
            self.info.job_name,
            self.info.run_id,
            acknowledgement.checkpoint_id,
            self.environment.storage,
        )
        sink.commit(context, committables)
        sink.post_commit(context, committables)
        return committables

    # ---- reading results ----

    def output(self) -> pa.Table:
        """Everything the chain emitted, as one table (empty if nothing)."""
        batches = self.writer.batches
        return pa.Table.from_batches(batches) if batches else pa.table({})

    def output_rows(self) -> list[Row]:
        """Everything emitted, as rows."""
        rows: list[Row] = self.output().to_pylist()
        return rows

    def side_output(self, tag: OutputTag) -> pa.Table:
        """Everything the chain emitted to side output ``tag`` (empty if nothing)."""
        batches = self.writer.side_batches.get(check_tag(tag, "side_output").name)
        return pa.Table.from_batches(batches) if batches else pa.table({})

    def side_output_rows(self, tag: OutputTag) -> list[Row]:
        """Everything emitted to side output ``tag``, as rows."""
        rows: list[Row] = self.side_output(tag).to_pylist()
        return rows

    @property
    def watermarks(self) -> list[int]:
        """Watermarks that left the chain, in order."""
        return self.writer.watermarks

    @property
    def watermark_statuses(self) -> list[bool]:
        """Watermark statuses that left the chain, in order (True: idle)."""
        return self.writer.statuses

    @property
    def state(self) -> ExecutionState:
        """The task's execution state."""
        return self.task.state

    @property
    def acknowledgement(self) -> TaskAcknowledgement | None:
        """The acknowledgement of the epoch's snapshot, once taken."""
        return self.task.acknowledgement

    # ---- internals ----

    def _send(self, event: Any) -> None:
        self.open()
        self._driver.send(event)

    def _barrier(self, barrier: CheckpointBarrier) -> None:
        self.open()
        taken = self.task.snapshot
        if self._driver.done and (taken is None or taken.checkpoint_id != barrier.checkpoint_id):
            raise RuntimeError(
                f"task '{self.info.task_name}' already ended ({self.state.value}) after "
                f"checkpoint {self.task.barrier.checkpoint_id if self.task.barrier else '-'}: "
                f"it takes no checkpoint {barrier.checkpoint_id}; continue from its snapshot "
                f"in a new harness (restore_from=...)"
            )
        channels = self.environment.input_channels
        for input_index, count in channels.items():
            for channel in range(count):
                if self._driver.done:
                    return
                self._driver.send(
                    CheckpointBarrier(
                        barrier.checkpoint_id, barrier.kind, barrier.final, channel, input_index
                    )
                )

    def _snapshot(self) -> TaskSnapshot:
        if self.task.snapshot is None:
            raise AssertionError(f"the task ended {self.state.value} without a snapshot")
        return self.task.snapshot

    def _default_channels(self) -> dict[int, int]:
        return {1: 1}

    def _epoch_barrier(self) -> CheckpointBarrier | None:
        return None

    @staticmethod
    def _as_restore(
        restore_from: TaskSnapshot | TaskRestore | None, aborted: Iterable[int]
    ) -> TaskRestore | None:
        if restore_from is None or isinstance(restore_from, TaskRestore):
            return restore_from
        return TaskRestore(restore_from.checkpoint_id, [restore_from], sorted(aborted))


def as_source_operator(
    source: Source | SourceOperator | list[Row], suffix: str | None = None
) -> SourceOperator:
    """A harness's source as the operator that reads it (rows: a ``CollectionSource``),
    named ``source:<name>`` (``source:<name>:<suffix>`` with a suffix)."""
    if isinstance(source, SourceOperator):
        return source
    if isinstance(source, list):
        source = CollectionSource(source)
    name = f"source:{source.name}" + (f":{suffix}" if suffix else "")
    return SourceOperator(source, name=name)
