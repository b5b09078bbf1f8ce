"""The DataStream API: build a program on the driver, run it on Spark with execute().

Every operator is built from the operator registered under its name (``map``,
``filter``, ``keyed_process`` ...), so plugins can replace or add any of them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.functions import CoProcessFunction, ProcessFunction, SinkFunction
from flintlock.core.job_folder import check_job_name
from flintlock.core.job_graph import GraphError, InputEdge, Transformation
from flintlock.core.job_master import JobConfig, JobExecutionResult, JobMaster
from flintlock.core.operator import StreamOperator
from flintlock.core.parquet_source import ParquetSource
from flintlock.core.partitioners import BROADCAST, REBALANCE, Partitioner, hash_by
from flintlock.core.plugin_manager import build_plugin_manager
from flintlock.core.registry import build_registry
from flintlock.core.sink_api import TwoPhaseCommitSink
from flintlock.core.source import CollectionSource, Source, SourceOperator
from flintlock.core.spark_session import active_or_local_session
from flintlock.core.spark_sources import DataFrameSource
from flintlock.core.watermarks import WatermarkStrategy

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NEW_RUN_ENV = "FLINTLOCK_NEW_RUN"
"""Set to 1 by ``flintlock run --new-run``: the default of ``execute(new_run=...)``."""

Feed = list[tuple[Transformation, Partitioner | None]]


class StreamExecutionEnvironment:
    """Where a program is built and run: parallelism, Spark session, checkpoint storage.

    With no session given it uses the active one, or starts an embedded local one and
    stops it after ``execute``. Outside local mode ``checkpoint_dir`` is required.
    """

    def __init__(
        self,
        parallelism: int | None = None,
        spark: SparkSession | None = None,
        checkpoint_dir: str | None = None,
        max_parallelism: int = 128,
        state_backend: str = "hashmap",
        plugins: Iterable[object] = (),
        master: str | None = None,
        keep_temporary_checkpoints: bool = False,
    ) -> None:
        from_env = os.environ.get("FLINTLOCK_PARALLELISM")  # set by `flintlock run`
        self.parallelism = parallelism or (int(from_env) if from_env else os.cpu_count() or 2)
        if not 0 < self.parallelism <= max_parallelism:
            raise GraphError(f"parallelism {self.parallelism} must be in 1..{max_parallelism}")
        self.spark = spark
        self.master = master or os.environ.get("FLINTLOCK_MASTER")
        self.checkpoint_dir = checkpoint_dir
        self.keep_temporary_checkpoints = keep_temporary_checkpoints
        self.max_parallelism = max_parallelism
        self.state_backend = state_backend
        self.plugins = list(plugins)
        self.registry = build_registry(build_plugin_manager(self.plugins))
        self.transformations: list[Transformation] = []

    # ---- sources ----

    def from_collection(
        self,
        rows: Sequence[dict[str, Any]],
        schema: pa.Schema | None = None,
        batch_size: int = 65536,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A bounded stream of dicts (held in the job: for small data and tests)."""
        return self.from_source(CollectionSource(rows, batch_size, schema), watermark_strategy)

    def from_arrow(
        self,
        table: pa.Table,
        batch_size: int = 65536,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A bounded stream of a pyarrow Table's rows."""
        return self.from_source(CollectionSource(table, batch_size), watermark_strategy)

    def from_dataframe(self, frame: DataFrame, name: str = "dataframe") -> DataStream:
        """A bounded stream of a Spark DataFrame, read by ``parallelism`` subtasks."""
        stream = self.from_source(DataFrameSource(), name=name)
        stream.transformation.spark_source = frame.repartition(self.parallelism)
        return stream

    def from_parquet(
        self,
        path: str,
        batch_size: int = 65536,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A bounded stream of the Parquet files under ``path`` (local path or URI)."""
        return self.from_source(ParquetSource(path, batch_size), watermark_strategy)

    def from_source(
        self,
        source: Source,
        watermark_strategy: WatermarkStrategy | None = None,
        name: str | None = None,
    ) -> DataStream:
        """A stream read by a Source plugin."""
        label = self._unique(name or f"source:{source.name}")

        def make() -> StreamOperator:
            return SourceOperator(source, watermark_strategy, name=label)

        t = self._add(label, make, [], is_source=True)
        column = watermark_strategy.timestamp_column if watermark_strategy else None
        return DataStream(self, [(t, None)], timestamp_column=column)

    # ---- running ----

    def execute(self, job_name: str = "job", new_run: bool | None = None) -> JobExecutionResult:
        """Run the program as a bounded job: one epoch, final checkpoint, commits.

        A job is (checkpoint dir, job name). If a run of it FINISHED before, its stored
        result is returned and nothing runs; if its final checkpoint completed but the
        commit did not, the commit is completed. ``new_run=True`` (``flintlock run
        --new-run``, or FLINTLOCK_NEW_RUN=1) runs the job again anyway; its sinks' output
        modes decide what it may do to their existing output. With no ``checkpoint_dir``
        (local mode only) a temporary one is used and removed after the job, unless
        ``keep_temporary_checkpoints`` is set.
        """
        if not any(t.is_sink for t in self.transformations):
            raise GraphError("the program has no sink: add sink_to(...), print() or collect()")
        check_job_name(job_name)
        if new_run is None:
            new_run = os.environ.get(NEW_RUN_ENV, "") not in ("", "0")
        spark, owned = active_or_local_session(self.spark, self.master)
        temporary = None
        try:
            checkpoint_dir = self.checkpoint_dir
            if checkpoint_dir is None:
                master = _master(spark)
                if not _is_local(master):
                    raise GraphError(
                        f"Spark master {master or '(unknown)'} is not local mode: give "
                        f"checkpoint_dir, storage that the driver and every executor share"
                    )
                checkpoint_dir = temporary = tempfile.mkdtemp(prefix="flintlock-checkpoints-")
            config = JobConfig(
                job_name,
                checkpoint_dir,
                self.max_parallelism,
                self.state_backend,
                self.plugins,
            )
            return JobMaster(spark, self.transformations, config).execute(new_run=new_run)
        finally:
            if temporary is not None and not self.keep_temporary_checkpoints:
                shutil.rmtree(temporary, ignore_errors=True)
            if owned:
                spark.stop()

    # ---- internals ----

    def _add(
        self,
        name: str,
        make_operator: Callable[[], StreamOperator],
        inputs: list[InputEdge],
        parallelism: int | None = None,
        is_source: bool = False,
        sink: TwoPhaseCommitSink | None = None,
        is_sink: bool = False,
    ) -> Transformation:
        t = Transformation(
            id=len(self.transformations),
            name=name,
            make_operator=make_operator,
            parallelism=parallelism or self.parallelism,
            inputs=inputs,
            is_source=is_source,
            sink=sink,
            is_sink=is_sink,
        )
        self.transformations.append(t)
        return t

    def _unique(self, name: str) -> str:
        taken = {t.name for t in self.transformations}
        if name not in taken:
            return name
        n = 2
        while f"{name}-{n}" in taken:
            n += 1
        return f"{name}-{n}"

    def operator(self, kind: str) -> Callable[..., StreamOperator]:
        """The operator factory registered as ``kind``."""
        return self.registry.get("operator", kind)


class DataStream:
    """A stream of record batches; each method adds an operator and returns its output."""

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        feed: Feed,
        key_column: str | None = None,
        timestamp_column: str | None = None,
    ) -> None:
        self.env = env
        self.feed = feed
        self.key_column = key_column
        self.timestamp_column = timestamp_column

    @property
    def transformation(self) -> Transformation:
        """The transformation producing this stream (not defined for a union)."""
        if len(self.feed) != 1:
            raise GraphError("a union of streams has no single transformation")
        return self.feed[0][0]

    # ---- transformations ----

    def map(self, function: Any, name: str | None = None) -> DataStream:
        """One row per row: a MapFunction or a callable on dicts (per record)."""
        factory = self.env.operator("map")
        return self._then("map", name, lambda n: factory(function, name=n))

    def map_batch(
        self, function: Callable[[pa.RecordBatch], pa.RecordBatch], name: str | None = None
    ) -> DataStream:
        """A batch per batch, same rows count (the fast path)."""
        factory = self.env.operator("map")
        return self._then("map", name, lambda n: factory(function, name=n, batch=True))

    def filter(self, function: Any, name: str | None = None) -> DataStream:
        """Keep rows where a FilterFunction or a callable on dicts holds."""
        factory = self.env.operator("filter")
        return self._then("filter", name, lambda n: factory(function, name=n))

    def filter_batch(
        self, function: Callable[[pa.RecordBatch], Any], name: str | None = None
    ) -> DataStream:
        """Keep rows where the boolean mask returned per batch holds (the fast path)."""
        factory = self.env.operator("filter")
        return self._then("filter", name, lambda n: factory(function, name=n, batch=True))

    def flat_map(self, function: Any, name: str | None = None) -> DataStream:
        """Zero or more rows per row."""
        factory = self.env.operator("flat_map")
        return self._then("flat_map", name, lambda n: factory(function, name=n))

    def key_by(self, column: str) -> DataStream:
        """Partition by the key group of ``column``: keyed state and timers downstream."""
        feed: Feed = [(t, hash_by(column)) for t, _ in self.feed]
        return DataStream(self.env, feed, key_column=column, timestamp_column=self.timestamp_column)

    def process(self, function: ProcessFunction, name: str | None = None) -> DataStream:
        """A ProcessFunction per record; keyed (state, timers) after key_by."""
        key, stamp = self.key_column, self.timestamp_column
        if key is not None:
            keyed = self.env.operator("keyed_process")
            return self._then(
                "keyed_process",
                name,
                lambda n: keyed(function, key_column=key, timestamp_column=stamp, name=n),
            )
        plain = self.env.operator("process")
        return self._then(
            "process", name, lambda n: plain(function, timestamp_column=stamp, name=n)
        )

    def connect(self, other: DataStream) -> ConnectedStreams:
        """Two streams into one two-input operator (CoProcessFunction)."""
        return ConnectedStreams(self, other)

    def union(self, *others: DataStream) -> DataStream:
        """Records of all streams, into the next operator's one input."""
        feed = list(self.feed)
        for other in others:
            feed += other.feed
        return DataStream(self.env, feed, timestamp_column=self.timestamp_column)

    def transform(
        self, name: str, operator: Callable[[], StreamOperator] | str, *args: Any, **kwargs: Any
    ) -> DataStream:
        """Any operator: a factory, or the name of a registered one with its arguments."""
        if isinstance(operator, str):
            factory = self.env.operator(operator)
            return self._then(name, name, lambda n: factory(*args, name=n, **kwargs))
        return self._then(name, name, lambda n: _named(operator(), n))

    def set_parallelism(self, parallelism: int) -> DataStream:
        """Run this operator with ``parallelism`` subtasks."""
        if not 0 < parallelism <= self.env.max_parallelism:
            raise GraphError(f"parallelism {parallelism} must be in 1..{self.env.max_parallelism}")
        self.transformation.parallelism = parallelism
        return self

    def set_task_type(self, task_type: str) -> DataStream:
        """Run this operator (and what chains to it) in the registered task type ``task_type``.

        The operator then heads its own vertex, since a chain has exactly one task type."""
        self.env.registry.get("task type", task_type)  # a clear error if none is registered
        self.transformation.task_type = task_type
        return self

    def rebalance(self) -> DataStream:
        """Spread batches round robin over the next operator's subtasks."""
        return DataStream(
            self.env, [(t, REBALANCE) for t, _ in self.feed], timestamp_column=self.timestamp_column
        )

    def broadcast(self) -> DataStream:
        """Send every batch to every subtask of the next operator."""
        return DataStream(
            self.env, [(t, BROADCAST) for t, _ in self.feed], timestamp_column=self.timestamp_column
        )

    # ---- sinks ----

    def sink_to(self, sink: SinkFunction | TwoPhaseCommitSink, name: str | None = None) -> None:
        """Write the stream out: a 2PC sink (exactly once) or a plain SinkFunction."""
        if isinstance(sink, TwoPhaseCommitSink):
            factory = self.env.operator("two_phase_commit_sink")
            label = self.env._unique(name or f"sink:{sink.name}")
            self._then(label, label, lambda n: factory(sink, name=n), sink=sink, is_sink=True)
        else:
            factory = self.env.operator("sink")
            self._then("sink", name, lambda n: factory(sink, name=n), is_sink=True)

    def print(self, prefix: str = "") -> None:
        """Print every row (debugging)."""
        self.sink_to(self.env.registry.get("sink", "print")(prefix))

    def collect(self, job_name: str = "collect") -> pa.Table:
        """Run the program and return this stream's rows (exactly once, via a 2PC sink)."""
        sink = self.env.registry.get("sink", "collect")(name=self.env._unique("collect"))
        self.sink_to(sink, name=sink.name)
        result = self.env.execute(job_name)
        return result.collected.get(sink.name, pa.table({}))

    # ---- internals ----

    def _then(
        self,
        kind: str,
        name: str | None,
        build: Callable[[str], StreamOperator],
        sink: TwoPhaseCommitSink | None = None,
        is_sink: bool = False,
    ) -> DataStream:
        label = self.env._unique(name or kind)
        inputs = [InputEdge(t.id, 1, p) for t, p in self.feed]
        t = self.env._add(label, lambda: build(label), inputs, sink=sink, is_sink=is_sink)
        return DataStream(self.env, [(t, None)], timestamp_column=self.timestamp_column)


class ConnectedStreams:
    """Two streams feeding inputs 1 and 2 of one operator."""

    def __init__(self, first: DataStream, second: DataStream) -> None:
        self.first, self.second = first, second

    def process(self, function: CoProcessFunction, name: str | None = None) -> DataStream:
        """A CoProcessFunction; keyed when both streams were keyed."""
        env = self.first.env
        keys = (self.first.key_column, self.second.key_column)
        key_columns = keys if None not in keys else None
        stamps = (self.first.timestamp_column, self.second.timestamp_column)
        label = env._unique(name or "co_process")
        factory = env.operator("co_process")
        inputs = [InputEdge(t.id, 1, p) for t, p in self.first.feed] + [
            InputEdge(t.id, 2, p) for t, p in self.second.feed
        ]
        t = env._add(
            label,
            lambda: factory(
                function, key_columns=key_columns, timestamp_columns=stamps, name=label
            ),
            inputs,
        )
        return DataStream(env, [(t, None)])


def _named(operator: StreamOperator, name: str) -> StreamOperator:
    operator.name = name
    return operator


def _master(spark: SparkSession) -> str | None:
    """The session's master URL; None if it cannot be read (a Spark Connect server)."""
    try:
        return str(spark.conf.get("spark.master"))
    except Exception:
        return None


def _is_local(master: str | None) -> bool:
    """True for ``local`` and ``local[...]``, whose tasks share this machine's disk (not
    ``local-cluster[...]``, whose executors may not); an unknown master is not local."""
    return master is not None and (master == "local" or master.startswith("local["))
