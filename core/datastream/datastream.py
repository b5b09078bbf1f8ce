"""The DataStream API: build a program on the driver, run it on Spark with execute().

Every operator is built from the operator registered under its name (``map``,
``filter``, ``keyed_process`` ...), so plugins can replace or add any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.api.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    SinkFunction,
)
from flintlock.core.api.keyed_batch import KeyedBatchProcessFunction
from flintlock.core.api.keys import KeyFunction, KeySelector
from flintlock.core.api.side_outputs import OutputTag, check_tag
from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.api.watermarks import WatermarkStrategy
from flintlock.core.datastream.building import BuildingStream, Feed
from flintlock.core.datastream.checks import check_function, check_parallelism
from flintlock.core.datastream.collected import CollectedRows, positional_name_refused
from flintlock.core.datastream.combining import CombiningMethods
from flintlock.core.errors import GraphError
from flintlock.core.exchange.partitioners import hash_by
from flintlock.core.runtime.operator import StreamOperator

if TYPE_CHECKING:
    from flintlock.core.api.functions import FlatMapper, Mapper, Predicate
    from flintlock.core.api.join_functions import IntervalJoin, WindowJoin
    from flintlock.core.api.window_assigners import WindowAssigner
    from flintlock.core.datastream.windowed import WindowedStream

Key = str | Sequence[str] | KeySelector | KeyFunction
"""What ``key_by`` takes: a column, a list of columns (one tuple key) or a key selector."""


class DataStream(CombiningMethods, BuildingStream):
    """A stream of record batches; each method adds an operator and returns its output.

    ``schema`` is the schema of its records where the job's definition shows it: sources
    know it, filter/key_by/rebalance/broadcast keep it, map/flat_map/process know it from
    ``output_schema=``. Checks that need it (key columns, event-time columns) are made as
    the method is called, and skipped where it is unknown (None).
    """

    # ---- transformations ----

    def map(
        self, function: Mapper, name: str | None = None, output_schema: pa.Schema | None = None
    ) -> DataStream:
        """One row per row: a MapFunction or a callable on dicts (per record).

        ``output_schema`` (a pa.Schema) types the output rows (else the first output's
        types), makes the schema known downstream and is enforced at run time."""
        check_function("map", function, MapFunction)
        schema = self._output_schema("map", name, function, output_schema)
        factory = self.env.operator("map")
        return self._then(
            "map",
            name,
            lambda n: factory(function, name=n, output_schema=output_schema),
            schema=schema,
        )

    def map_batch(
        self,
        function: Callable[[pa.RecordBatch], pa.RecordBatch],
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """A batch per batch, same rows count (the fast path).

        ``output_schema`` makes the schema known downstream; each output batch is cast to it
        (a missing column or a value that does not cast is an error naming the column)."""
        check_function("map_batch", function, MapFunction)
        schema = self._output_schema("map_batch", name, function, output_schema)
        factory = self.env.operator("map")
        return self._then(
            "map",
            name,
            lambda n: factory(function, name=n, batch=True, output_schema=output_schema),
            schema=schema,
        )

    def filter(self, function: Predicate, name: str | None = None) -> DataStream:
        """Keep rows where a FilterFunction or a callable on dicts holds."""
        check_function("filter", function, FilterFunction)
        factory = self.env.operator("filter")
        return self._then("filter", name, lambda n: factory(function, name=n), schema=self.schema)

    def filter_batch(
        self, function: Callable[[pa.RecordBatch], pa.Array], name: str | None = None
    ) -> DataStream:
        """Keep rows where the boolean mask returned per batch holds (the fast path)."""
        check_function("filter_batch", function, FilterFunction)
        factory = self.env.operator("filter")
        return self._then(
            "filter", name, lambda n: factory(function, name=n, batch=True), schema=self.schema
        )

    def flat_map(
        self, function: FlatMapper, name: str | None = None, output_schema: pa.Schema | None = None
    ) -> DataStream:
        """Zero or more rows per row; ``output_schema`` as for ``map``."""
        check_function("flat_map", function, FlatMapFunction)
        schema = self._output_schema("flat_map", name, function, output_schema)
        factory = self.env.operator("flat_map")
        return self._then(
            "flat_map",
            name,
            lambda n: factory(function, name=n, output_schema=output_schema),
            schema=schema,
        )

    def key_by(self, key: Key) -> DataStream:
        """Partition by the key group of the key: keyed state and timers downstream.

        ``key`` is a column name, a list of column names (one combined key; keyed functions
        see it as a tuple from ``ctx.get_current_key()``), or a key selector: a
        ``KeySelector`` or a function of the row (a dict) returning the key — called once
        per record on each side of the exchange, so it is the slow path. Columns are
        checked against the known schema now."""
        selector = self._key_selector(key)
        feed: Feed = [(t, hash_by(selector), side) for t, _, side in self.feed]
        return DataStream(
            self.env,
            feed,
            key_selector=selector,
            timestamp_column=self.timestamp_column,
            schema=self.schema,
        )

    def process(
        self,
        function: ProcessFunction,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """A ProcessFunction per record; keyed (state, timers) after key_by.

        ``output_schema`` types what ``out.collect`` emits, as for ``map``."""
        check_function("process", function, ProcessFunction, callable_ok=False)
        schema = self._output_schema("process", name, function, output_schema)
        self._check_event_time("process", name)
        key, stamp = self.key_selector, self.timestamp_column
        if key is None and isinstance(function, KeyedProcessFunction):
            raise GraphError(
                f"process({name or ''}) after {self._follows()}: {type(function).__name__} is "
                f"a KeyedProcessFunction, which needs a keyed stream: call key_by(...) first"
            )
        if key is not None:
            keyed = self.env.operator("keyed_process")
            return self._then(
                "keyed_process",
                name,
                lambda n: keyed(
                    function,
                    key_selector=key,
                    timestamp_column=stamp,
                    name=n,
                    output_schema=output_schema,
                ),
                schema=schema,
            )
        plain = self.env.operator("process")
        return self._then(
            "process",
            name,
            lambda n: plain(function, timestamp_column=stamp, name=n, output_schema=output_schema),
            schema=schema,
        )

    def process_batch(
        self,
        function: KeyedBatchProcessFunction,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """A KeyedBatchProcessFunction on a keyed stream: called once per batch with the
        batch and its keys, it reads and updates state for all keys at once (fast path).

        ``output_schema`` is enforced on the batches it returns, as for ``map_batch``."""
        check_function("process_batch", function, KeyedBatchProcessFunction, callable_ok=False)
        schema = self._output_schema("process_batch", name, function, output_schema)
        key = self.key_selector
        if key is None:
            raise GraphError(
                f"process_batch({name or ''}) after {self._follows()}: a keyed batch function "
                f"needs a keyed stream: call key_by(...) first"
            )
        factory = self.env.operator("keyed_batch_process")
        return self._then(
            "keyed_batch_process",
            name,
            lambda n: factory(function, key_selector=key, name=n, output_schema=output_schema),
            schema=schema,
        )

    def window(self, assigner: WindowAssigner) -> WindowedStream:
        """Cut a keyed stream into event-time windows (tumbling, sliding, sessions); then
        ``reduce``, ``aggregate`` or ``process`` each window."""
        from flintlock.core.datastream.windowed import WindowedStream

        return WindowedStream(self, assigner)

    def interval_join(self, other: DataStream) -> IntervalJoin:
        """Join this keyed stream with ``other`` (keyed alike) on event time:
        ``.between(lower, upper).process(ProcessJoinFunction)``."""
        from flintlock.core.api.join_functions import IntervalJoin

        return IntervalJoin(self, other)

    def join(self, other: DataStream) -> WindowJoin:
        """Join with ``other`` per event-time window:
        ``.where(key).equal_to(key).window(assigner).apply(fn)``."""
        from flintlock.core.api.join_functions import WindowJoin

        return WindowJoin(self, other)

    def assign_timestamps_and_watermarks(
        self, strategy: WatermarkStrategy, name: str | None = None
    ) -> DataStream:
        """Event time from here on follows ``strategy`` (Flink's operator of that name):
        upstream watermarks are dropped, the strategy's own are emitted after each batch."""
        if not isinstance(strategy, WatermarkStrategy):
            raise GraphError(
                f"assign_timestamps_and_watermarks takes a WatermarkStrategy, not {strategy!r}"
            )
        if self.schema is not None:
            strategy.check_schema(
                self.schema, f"assign_timestamps_and_watermarks after {self._follows()}"
            )
        factory = self.env.operator("timestamps_and_watermarks")
        stream = self._then(
            "timestamps_watermarks",
            name,
            lambda n: factory(strategy, name=n),
            schema=self.schema,
        )
        stream.timestamp_column = strategy.timestamp_column
        return stream

    def get_side_output(self, tag: OutputTag) -> DataStream:
        """The stream of what this operator's function sent to ``tag`` with
        ``ctx.output(tag, row)``; its schema is the tag's."""
        check_tag(tag, f"get_side_output after {self._follows()}")
        if len(self.feed) != 1 or self.feed[0][2] is not None:
            raise GraphError(
                f"get_side_output('{tag.name}') needs the stream of one operator, not "
                f"{self._follows()} (a union or another side output)"
            )
        upstream = self.feed[0][0]
        stamp = self.timestamp_column
        if stamp is not None and (tag.schema is None or tag.schema.get_field_index(stamp) < 0):
            stamp = None
        return DataStream(
            self.env, [(upstream, None, tag.name)], timestamp_column=stamp, schema=tag.schema
        )

    def transform(
        self, name: str, operator: Callable[[], StreamOperator] | str, *args: Any, **kwargs: Any
    ) -> DataStream:
        """Any operator: a factory, or the name of a registered one with its arguments."""
        if isinstance(operator, str):
            factory = self.env.operator(operator)
            return self._then(name, name, lambda n: factory(*args, name=n, **kwargs))
        if not callable(operator):
            raise GraphError(
                f"transform('{name}'): operator must be a registered operator's name or a "
                f"factory (a callable returning an operator), not {operator!r}"
            )
        return self._then(name, name, lambda n: _named(operator(), n))

    def set_parallelism(self, parallelism: int) -> DataStream:
        """Run this operator with ``parallelism`` subtasks (a DataFrame source repartitions
        its input to that many)."""
        transformation = self.transformation
        name = transformation.name
        check_parallelism(parallelism, self.env.max_parallelism, f"'{name}': set_parallelism")
        transformation.parallelism = parallelism
        transformation.parallelism_from_partitions = False
        return self

    def uid(self, uid: str) -> DataStream:
        """Name this operator's state in checkpoints by ``uid`` (default: its name).

        A restore gives each operator the state of the operator with the same uid, so
        state survives renaming and reordering; uids are unique within a job."""
        if not isinstance(uid, str) or not uid:
            raise GraphError(f"uid must be a non-empty string, not {uid!r}")
        self.transformation.uid = uid
        return self

    def set_task_type(self, task_type: str) -> DataStream:
        """Run this operator (and what chains to it) in the registered task type ``task_type``.

        The operator then heads its own vertex, since a chain has exactly one task type."""
        self.env.registry.get("task type", task_type)  # a clear error if none is registered
        self.transformation.task_type = task_type
        return self

    # ---- sinks ----

    def sink_to(
        self, sink: SinkFunction | TwoPhaseCommitSink[Any, Any], name: str | None = None
    ) -> None:
        """Write the stream out: a 2PC sink (exactly once) or a plain SinkFunction."""
        if isinstance(sink, TwoPhaseCommitSink):
            factory = self.env.operator("two_phase_commit_sink")
            label = self.env._unique(name or f"sink:{sink.name}")
            if self.schema is not None:
                sink.input_schema = self.schema
            sink.job_storage_options = self.env.storage_options
            self._then(label, label, lambda n: factory(sink, name=n), sink=sink, is_sink=True)
        else:
            factory = self.env.operator("sink")
            self._then("sink", name, lambda n: factory(sink, name=n), is_sink=True)

    def print(self, prefix: str = "") -> None:
        """Print every row (debugging)."""
        self.sink_to(self.env.registry.get("sink", "print")(prefix))

    def collect_async(self, name: str | None = None) -> CollectedRows:
        """Add a collect sink (a 2PC sink: exactly once) that runs with ``env.execute()``;
        its rows are the handle's ``table()`` afterwards (Flink's ``collectAsync``)."""
        collect_sink = self.env.registry.get("sink", "collect")
        sink = collect_sink(name=name or self.env._unique("collect"), schema=self.schema)
        self.sink_to(sink, name=sink.name)
        return CollectedRows(sink)

    def execute_and_collect(self, job_name: str = "collect") -> pa.Table:
        """Run the program now, as job ``job_name``, and return this stream's rows
        (exactly once; Flink's ``executeAndCollect``)."""
        rows = self.collect_async()
        result = self.env.execute(job_name)
        return result.collected.get(rows.name, pa.table({}))

    def collect(self, *names: object, job_name: str = "collect") -> pa.Table:
        """``execute_and_collect``: run the program now and return this stream's rows. The
        job's name is a keyword: a positional name is refused, as it reads like a sink's."""
        if names:
            raise positional_name_refused(names[0])
        return self.execute_and_collect(job_name)


def _named(operator: StreamOperator, name: str) -> StreamOperator:
    operator.name = name
    return operator
