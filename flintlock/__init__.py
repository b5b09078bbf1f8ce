"""flintlock: Apache Flink's task and operator lifecycle, in Python, on Apache Spark.

The names a job author uses, listed in ``__all__``: core/'s modules may move between
releases while these names stay, so programs import from here (plugins also from
``flintlock.plugin_api``), never from ``flintlock.core``."""

from pathlib import Path as _Path
from typing import Any as _Any

# Installed, flintlock.core and its siblings sit inside this folder. Imported from a source
# checkout (a Spark worker started by `python -m` in the repository puts it first on
# sys.path), they are this folder's siblings core/, plugins/, operators/ and sinks/, which
# setuptools' package-dir maps at install time: map them the same way here.
# Why it must stay: ARCHITECTURE.md keeps core/, plugins/, operators/ and sinks/ at the
# repository's top beside flintlock/, and a process whose sys.path starts with the checkout
# finds this folder as `flintlock` before any installed or editable mapping (setuptools'
# editable finder comes after the path finder), so `flintlock.core` would not import there
# without it; a meta path finder would do the same in more code.
_here = _Path(__file__).resolve().parent
if not (_here / "core").is_dir() and (_here.parent / "core" / "hooks" / "specs.py").is_file():
    __path__.append(str(_here.parent))

from flintlock.core.api.async_functions import AsyncFunction, AsyncRetryStrategy
from flintlock.core.api.functions import (
    Collector,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    MapFunction,
    OnTimerContext,
    ProcessContext,
    ProcessFunction,
    RuntimeContext,
    SinkFunction,
    TimerService,
)
from flintlock.core.api.join_functions import JoinContext, ProcessJoinFunction
from flintlock.core.api.keyed_batch import KeyedBatchContext, KeyedBatchProcessFunction
from flintlock.core.api.keys import KeySelector
from flintlock.core.api.restart_strategies import RestartStrategy
from flintlock.core.api.side_outputs import OutputTag
from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.api.watermark_generators import WatermarkGenerator, WatermarkOutput
from flintlock.core.api.watermarks import WatermarkStrategy
from flintlock.core.api.window_assigners import (
    EventTimeSessionWindows,
    EventTimeTrigger,
    ProcessingTimeTrigger,
    SlidingEventTimeWindows,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from flintlock.core.api.window_functions import ProcessWindowFunction, WindowContext
from flintlock.core.datastream.async_stream import AsyncDataStream
from flintlock.core.datastream.broadcast import (
    BroadcastContext,
    BroadcastProcessFunction,
    BroadcastStream,
    KeyedBroadcastProcessFunction,
)
from flintlock.core.datastream.datastream import DataStream
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.datastream.live_page import register_starter as _register_page
from flintlock.core.datastream.windowed import WindowedStream
from flintlock.core.errors import (
    ChannelError,
    CheckpointDirectoryError,
    CheckpointError,
    CommitError,
    CommittableError,
    EmitAfterFinishError,
    EventTimeError,
    FlintlockError,
    GraphError,
    JobIdentityError,
    LifecycleError,
    NotPicklableError,
    PluginError,
    SchemaMismatchError,
    SideOutputError,
    SinkOutputError,
)
from flintlock.core.events import MAX_WATERMARK, Watermark
from flintlock.core.hooks.manager import hookimpl
from flintlock.core.job.client import JobClient
from flintlock.core.job.result import JobExecutionResult
from flintlock.core.runtime.execution_state import ExecutionState
from flintlock.core.runtime.operator import (
    MultipleInputStreamOperator,
    OneInputStreamOperator,
    StreamOperator,
    TwoInputStreamOperator,
)
from flintlock.core.runtime.processing_time import ManualClock
from flintlock.core.runtime.task import StreamTask
from flintlock.core.runtime.timers import TimeDomain
from flintlock.core.sources.epochs import EpochSplits, UnboundedSource
from flintlock.core.sources.sequence import SequenceSource
from flintlock.core.sources.source import (
    CollectionSource,
    Source,
    SourceEpoch,
    SourceOperator,
    SourceReader,
)
from flintlock.core.spark.streaming_source import StreamingDataFrameSource
from flintlock.core.state import (
    AggregateFunction,
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    StateTtlConfig,
    StateVisibility,
    UpdateType,
    ValueState,
    ValueStateDescriptor,
)
from flintlock.core.state.backend import KeyedStateBackend, StateBackend
from flintlock.core.storage.options import StorageOptions as _StorageOptions
from flintlock.plugins.hashmap_backend import HashMapStateBackend
from flintlock.plugins.one_input_task import OneInputStreamTask
from flintlock.plugins.source_task import SourceStreamTask
from flintlock.plugins.sqlite_backend import SQLiteStateBackend
from flintlock.plugins.two_input_task import TwoInputStreamTask
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.delta import DeltaSink
from flintlock.sinks.files import FileSink
from flintlock.sinks.print import PrintSink

__version__ = "0.1.0"

__all__ = [
    "MAX_WATERMARK",
    "AggregateFunction",
    "AggregatingState",
    "AggregatingStateDescriptor",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryStrategy",
    "BroadcastContext",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "ChannelError",
    "CheckpointDirectoryError",
    "CheckpointError",
    "CoProcessFunction",
    "CollectSink",
    "CollectionSource",
    "Collector",
    "CommitError",
    "CommittableError",
    "DataStream",
    "DeltaSink",
    "EmitAfterFinishError",
    "EpochSplits",
    "EpochTrigger",
    "EventTimeError",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "ExecutionState",
    "FileSink",
    "FilterFunction",
    "FlatMapFunction",
    "FlintlockError",
    "Function",
    "GraphError",
    "HashMapStateBackend",
    "JobClient",
    "JobExecutionResult",
    "JobIdentityError",
    "JoinContext",
    "KeySelector",
    "KeyedBatchContext",
    "KeyedBatchProcessFunction",
    "KeyedBroadcastProcessFunction",
    "KeyedProcessFunction",
    "KeyedStateBackend",
    "LifecycleError",
    "ListState",
    "ListStateDescriptor",
    "ManualClock",
    "MapFunction",
    "MapState",
    "MapStateDescriptor",
    "MultipleInputStreamOperator",
    "NotPicklableError",
    "OnTimerContext",
    "OneInputStreamOperator",
    "OneInputStreamTask",
    "OutputTag",
    "PluginError",
    "PrintSink",
    "ProcessContext",
    "ProcessFunction",
    "ProcessJoinFunction",
    "ProcessWindowFunction",
    "ProcessingTimeTrigger",
    "ReducingState",
    "ReducingStateDescriptor",
    "RestartStrategy",
    "RuntimeContext",
    "SQLiteStateBackend",
    "SchemaMismatchError",
    "SequenceSource",
    "SideOutputError",
    "SinkFunction",
    "SinkOutputError",
    "SlidingEventTimeWindows",
    "Source",
    "SourceEpoch",
    "SourceOperator",
    "SourceReader",
    "SourceStreamTask",
    "StateBackend",
    "StateTtlConfig",
    "StateVisibility",
    "StreamExecutionEnvironment",
    "StreamOperator",
    "StreamTask",
    "StreamingDataFrameSource",
    "TimeDomain",
    "TimeWindow",
    "TimerService",
    "Trigger",
    "TriggerResult",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "TwoInputStreamOperator",
    "TwoInputStreamTask",
    "TwoPhaseCommitSink",
    "UnboundedSource",
    "UpdateType",
    "ValueState",
    "ValueStateDescriptor",
    "Watermark",
    "WatermarkGenerator",
    "WatermarkOutput",
    "WatermarkStrategy",
    "WindowAssigner",
    "WindowContext",
    "WindowedStream",
    "__version__",
    "hookimpl",
]


def _job_page(checkpoint_dir: str, job_name: str, options: _StorageOptions, port: int) -> _Any:
    """``execute(ui_port=...)``'s page: ``flintlock.ui``, imported when a job asks for it
    (it needs the ``ui`` extra); core/ reaches it only through this registration."""
    try:
        from flintlock.ui.server import job_page
    except ImportError as error:
        raise GraphError(
            f"ui_port needs the `ui` extra ({error.name} is missing): pip install 'flintlock[ui]'"
        ) from error
    return job_page(checkpoint_dir, job_name, options, port)


_register_page(_job_page)
