"""Everything a subtask is given to run: identity, operators, input, output, storage.

One object, so that a task runs the same code on Spark (built from the job's closure) and
in a test harness: only the input, the writer and the storage differ between the two."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pluggy

from flintlock.core.checkpoint.snapshots import TaskRestore
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.events import CheckpointBarrier, InputEvent
from flintlock.core.runtime.operator import StreamOperator
from flintlock.core.runtime.output import RecordWriter
from flintlock.core.runtime.processing_time import Clock, system_clock
from flintlock.core.task_info import TaskInfo


@dataclass
class TaskEnvironment:
    """The inputs of one subtask's invoke: on Spark from the job's closure, in tests from a
    harness. Only ``input``, ``writer`` and ``storage`` differ between the two."""

    info: TaskInfo
    operators: Sequence[StreamOperator]
    writer: RecordWriter
    storage: CheckpointStorage
    plugin_manager: pluggy.PluginManager
    input: Iterator[InputEvent] = field(default_factory=lambda: iter(()))
    input_channels: dict[int, int] = field(default_factory=lambda: {1: 1})
    restore: TaskRestore | None = None
    state_backend: str = "hashmap"
    chained_sources: dict[int, StreamOperator] = field(default_factory=dict)
    """Sources read inside a multiple-input task, by the head input they feed (FLIP-182)."""
    epoch_barrier: CheckpointBarrier | None = None
    """For source tasks: the barrier that ends their epoch (final for bounded jobs)."""
    ttl_clock: Callable[[], int] | None = None
    """The processing-time clock of state TTL (epoch ms); None: the wall clock."""
    clock: Clock = system_clock
    """Processing time in ms: the wall clock, or a harness's ManualClock."""
    snapshot_root: str | None = None
    """Where the epoch's snapshot goes instead of the run's folder (a savepoint's folder)."""
    records_in: Callable[[], int] | None = None
    """Records the subtask read from its input channels so far (None: a source subtask,
    whose head counts what it read)."""
    metrics: bool = True
    """Take the subtask's metrics at each snapshot and send them in its acknowledgement."""
