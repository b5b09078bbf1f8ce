"""What a plugin is written against beyond the user API, from one stable module.

A task type, a state backend, an operator, a source or a sink imports the names a job
author also uses from ``flintlock`` (``hookimpl``, ``StreamTask`` and the built-in task
types, the operator and state backend base classes, ``TwoPhaseCommitSink``, ``Source``,
the state descriptors, the errors) and the names only a plugin needs from here; never
from ``flintlock.core``, whose modules may move between releases while these names stay.
Each name is listed once, here or in ``flintlock.__all__``. flintlock's own operators,
task types, state backends, sources and sinks import nothing else (tests/
test_plugin_surface.py). CONTRIBUTING.md walks through each kind of plugin.

Registration
- ``build_plugin_manager`` / ``build_registry``: a manager with the entry-point plugins
  and the registry of what they register, as a test or a tool builds them;
  ``Registry`` is that registry's type.
- ``TaskPhase``: the task's invoke phases, named by ``flintlock_task_invoke_phase``.

Operators
- ``OperatorContext``: what an operator is handed at setup (identity, hooks, state);
  ``Output``: where it emits batches and watermarks.
- ``UdfOperatorMixin``: forwards the lifecycle to a user function (``self.function``);
  ``overrides(function, method, base)`` tells whether the function overrides a method.
- ``Row``: a record as a per-record function sees it (a dict of column to value).
- ``rows_of(batch)`` / ``column_values(column)``: a batch's rows, a column's values as
  Python objects, fast; ``conform_batch`` casts a batch to a declared schema.
- ``RowOutputMixin``: collects a per-record function's rows and emits them as batches
  (``RowBatchBuilder``, holding back output while a column's type is unknown:
  ``HeldOutputMixin``); ``SideOutputCollector``: rows sent to side outputs.
- ``FusedRowsMixin`` / ``RowStage``: lets a per-record operator join the run of
  per-record operators the chain fuses into one loop (map, filter, flat_map, process).
- ``event_times(batch, column)`` / ``event_time_millis``: an event-time column as epoch
  milliseconds; ``MIN_TIMESTAMP`` / ``MAX_TIMESTAMP`` bound them.
- ``WatermarkEmitter``: runs a ``WatermarkStrategy``'s generator over the batches.
- ``WindowContents`` / ``AggregateContents``: how a window's contents grow and fire.
- ``StateDescriptor``: the base of the state descriptors; ``BroadcastState``: the map
  every subtask holds the same copy of.

Keys and key groups (a key -> key group -> subtask, as Flink)
- ``ColumnKey`` / ``ColumnsKey`` / ``FunctionKey``: the key selectors of a column, of
  several columns, of a function of the row; ``python_keys`` / ``keys_to_arrow`` convert
  keys between Arrow and Python; ``is_key_type``: a column type that can be a key.
- ``key_group_of`` / ``key_groups_of`` (a column at once), ``key_group_range``,
  ``subtask_for_key_group``, ``DEFAULT_MAX_PARALLELISM``.

Task types
- ``InputStreamTask``: the channel-reading task to subclass; the input events its run
  loop receives: ``InputEvent`` and its kinds ``DataEvent``, ``CheckpointBarrier``,
  ``EndOfInputEvent``, ``ProcessingTimeTick``, ``WatermarkEvent``,
  ``WatermarkStatusEvent``.
- ``TaskInfo``: a subtask's identity (job, task, subtask, epoch, attempt), handed to hooks.

State backends
- ``TableKeyedStateBackend``: the table-backed base (one table per state), written in
  ``Chunk``s and restored from ``RestoredEntries``; ``CheckpointStorage``: where
  snapshots are written; ``StateError`` / ``RestoreError``: what a backend raises.

Sinks
- ``SinkWriterContext`` / ``CommitContext`` / ``OutputCheckContext``: what a
  ``TwoPhaseCommitSink``'s writer, committer and output check are handed;
  ``OUTPUT_MODES``: what a new run may do to output that already holds data.
- ``StorageOptions``: the environment's object-store settings a sink or source opens
  its output with (``TwoPhaseCommitSink.job_storage_options``).
- ``list_folder`` / ``safe_name``: a folder's listing on any ``pyarrow.fs`` file system
  (empty if absent), a name made injective and file-name safe.
- ``s3_client``: a boto3 S3 client with the endpoint and credentials of a pyarrow
  ``S3FileSystem``, for what Arrow cannot do (the ``s3`` extra installs boto3).
"""

from flintlock.core.api.functions import Row, overrides
from flintlock.core.api.keys import ColumnKey, ColumnsKey, FunctionKey, python_keys
from flintlock.core.api.side_outputs import SideOutputCollector
from flintlock.core.api.sink import (
    OUTPUT_MODES,
    CommitContext,
    OutputCheckContext,
    SinkWriterContext,
)
from flintlock.core.api.watermarks import event_time_millis, event_times
from flintlock.core.api.window_functions import AggregateContents, WindowContents
from flintlock.core.checkpoint.storage import CheckpointStorage, list_folder, safe_name
from flintlock.core.errors import RestoreError, StateError
from flintlock.core.events import (
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    CheckpointBarrier,
    DataEvent,
    EndOfInputEvent,
    InputEvent,
    ProcessingTimeTick,
    WatermarkEvent,
    WatermarkStatusEvent,
)
from flintlock.core.exchange.key_groups import (
    DEFAULT_MAX_PARALLELISM,
    key_group_of,
    key_group_range,
    subtask_for_key_group,
)
from flintlock.core.exchange.murmur import is_key_type, key_groups_of
from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import Registry, build_registry
from flintlock.core.hooks.specs import TaskPhase
from flintlock.core.runtime.input_task import InputStreamTask
from flintlock.core.runtime.mailbox import MailboxExecutor
from flintlock.core.runtime.operator import OperatorContext, UdfOperatorMixin
from flintlock.core.runtime.output import Output
from flintlock.core.runtime.records import column_values, conform_batch, rows_of
from flintlock.core.runtime.row_batches import HeldOutputMixin, RowBatchBuilder
from flintlock.core.runtime.row_output import FusedRowsMixin, RowOutputMixin, RowStage
from flintlock.core.sources.watermark_emitter import WatermarkEmitter
from flintlock.core.state.arrow_codec import keys_to_arrow
from flintlock.core.state.descriptors import StateDescriptor
from flintlock.core.state.operator_state import BroadcastState
from flintlock.core.state.state_files import RestoredEntries
from flintlock.core.state.table_backend import Chunk, TableKeyedStateBackend
from flintlock.core.storage.conditional import s3_client
from flintlock.core.storage.options import StorageOptions
from flintlock.core.task_info import TaskInfo

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
    "OUTPUT_MODES",
    "AggregateContents",
    "BroadcastState",
    "CheckpointBarrier",
    "CheckpointStorage",
    "Chunk",
    "ColumnKey",
    "ColumnsKey",
    "CommitContext",
    "DataEvent",
    "EndOfInputEvent",
    "FunctionKey",
    "FusedRowsMixin",
    "HeldOutputMixin",
    "InputEvent",
    "InputStreamTask",
    "MailboxExecutor",
    "OperatorContext",
    "Output",
    "OutputCheckContext",
    "ProcessingTimeTick",
    "Registry",
    "RestoreError",
    "RestoredEntries",
    "Row",
    "RowBatchBuilder",
    "RowOutputMixin",
    "RowStage",
    "SideOutputCollector",
    "SinkWriterContext",
    "StateDescriptor",
    "StateError",
    "StorageOptions",
    "TableKeyedStateBackend",
    "TaskInfo",
    "TaskPhase",
    "UdfOperatorMixin",
    "WatermarkEmitter",
    "WatermarkEvent",
    "WatermarkStatusEvent",
    "WindowContents",
    "build_plugin_manager",
    "build_registry",
    "column_values",
    "conform_batch",
    "event_time_millis",
    "event_times",
    "is_key_type",
    "key_group_of",
    "key_group_range",
    "key_groups_of",
    "keys_to_arrow",
    "list_folder",
    "overrides",
    "python_keys",
    "rows_of",
    "s3_client",
    "safe_name",
    "subtask_for_key_group",
]
