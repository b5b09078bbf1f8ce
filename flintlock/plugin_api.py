"""Everything a plugin is written against, from one stable module.

A task type, a state backend, an operator or a two-phase-commit sink imports what it
needs from here (and user-facing names such as ``ValueStateDescriptor`` from
``flintlock``), never from ``flintlock.core``: core/'s modules may move between
releases, these names stay. CONTRIBUTING.md walks through each kind of plugin.

- registration: ``hookimpl``, the plugin manager and registry a test can build;
- operators: the operator base classes and what they are handed (context, output);
- task types: ``StreamTask``, the channel-reading ``InputStreamTask`` and the built-in
  task types to subclass, the input events a task's run loop receives;
- state backends: ``StateBackend`` / ``KeyedStateBackend``, the table-backed base, the
  checkpoint storage snapshots are written to, key groups (key -> key group -> subtask);
- sinks: ``TwoPhaseCommitSink`` and the contexts its writer and committer get;
- sources: ``Source`` and its ``SourceReader``; ``UnboundedSource``, whose driver-side
  ``plan_epoch`` returns ``EpochSplits`` (registered with ``flintlock_register_sources``);
- identity and errors: ``TaskInfo``, ``ExecutionState`` and every error a plugin raises
  or catches.
"""

from flintlock.core.api.functions import Function, RuntimeContext, SinkFunction
from flintlock.core.api.sink import (
    OUTPUT_MODES,
    CommitContext,
    OutputCheckContext,
    SinkWriterContext,
    TwoPhaseCommitSink,
)
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import (
    ChainError,
    ChannelError,
    CheckpointError,
    CommitError,
    CommittableError,
    EmitAfterFinishError,
    EventTimeError,
    FlintlockError,
    LifecycleError,
    PluginError,
    RestoreError,
    SchemaMismatchError,
    SinkOutputError,
    StateError,
)
from flintlock.core.events import (
    MAX_TIMESTAMP,
    MAX_WATERMARK,
    MIN_TIMESTAMP,
    CheckpointBarrier,
    DataEvent,
    EndOfInputEvent,
    InputEvent,
    ProcessingTimeTick,
    Watermark,
    WatermarkEvent,
    WatermarkStatusEvent,
)
from flintlock.core.exchange.key_groups import (
    DEFAULT_MAX_PARALLELISM,
    key_group_of,
    key_group_range,
    subtask_for_key_group,
)
from flintlock.core.hooks.manager import build_plugin_manager, hookimpl
from flintlock.core.hooks.registry import Registry, build_registry
from flintlock.core.hooks.specs import TaskPhase
from flintlock.core.runtime.execution_state import ExecutionState
from flintlock.core.runtime.input_task import InputStreamTask
from flintlock.core.runtime.operator import (
    OneInputStreamOperator,
    OperatorContext,
    StreamOperator,
    TwoInputStreamOperator,
    UdfOperatorMixin,
)
from flintlock.core.runtime.output import Output
from flintlock.core.runtime.task import StreamTask
from flintlock.core.runtime.timers import TimeDomain
from flintlock.core.sources.epochs import EpochSplits, UnboundedSource
from flintlock.core.sources.source import Source, SourceEpoch, SourceReader
from flintlock.core.state.backend import KeyedStateBackend, StateBackend
from flintlock.core.state.table_backend import Chunk, TableKeyedStateBackend
from flintlock.core.task_info import TaskInfo
from flintlock.plugins.one_input_task import OneInputStreamTask
from flintlock.plugins.source_task import SourceStreamTask
from flintlock.plugins.two_input_task import TwoInputStreamTask

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "MAX_TIMESTAMP",
    "MAX_WATERMARK",
    "MIN_TIMESTAMP",
    "OUTPUT_MODES",
    "ChainError",
    "ChannelError",
    "CheckpointBarrier",
    "CheckpointError",
    "CheckpointStorage",
    "Chunk",
    "CommitContext",
    "CommitError",
    "CommittableError",
    "DataEvent",
    "EmitAfterFinishError",
    "EndOfInputEvent",
    "EpochSplits",
    "EventTimeError",
    "ExecutionState",
    "FlintlockError",
    "Function",
    "InputEvent",
    "InputStreamTask",
    "KeyedStateBackend",
    "LifecycleError",
    "OneInputStreamOperator",
    "OneInputStreamTask",
    "OperatorContext",
    "Output",
    "OutputCheckContext",
    "PluginError",
    "ProcessingTimeTick",
    "Registry",
    "RestoreError",
    "RuntimeContext",
    "SchemaMismatchError",
    "SinkFunction",
    "SinkOutputError",
    "SinkWriterContext",
    "Source",
    "SourceEpoch",
    "SourceReader",
    "SourceStreamTask",
    "StateBackend",
    "StateError",
    "StreamOperator",
    "StreamTask",
    "TableKeyedStateBackend",
    "TaskInfo",
    "TaskPhase",
    "TimeDomain",
    "TwoInputStreamOperator",
    "TwoInputStreamTask",
    "TwoPhaseCommitSink",
    "UdfOperatorMixin",
    "UnboundedSource",
    "Watermark",
    "WatermarkEvent",
    "WatermarkStatusEvent",
    "build_plugin_manager",
    "build_registry",
    "hookimpl",
    "key_group_of",
    "key_group_range",
    "subtask_for_key_group",
]
