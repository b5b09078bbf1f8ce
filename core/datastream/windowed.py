"""``keyed.window(assigner)``: a keyed stream cut into event-time windows, then reduced,
aggregated or processed per window (Flink's WindowedStream).

Each method picks a window operator by name (``window``, ``window_aggregate``, and
``window_preaggregate`` chained before the exchange) and tries the window's shape and
functions here, so a wrong one is a GraphError before Spark starts, not on the workers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from flintlock.core.api.functions import Row
from flintlock.core.api.side_outputs import OutputTag, check_tag
from flintlock.core.api.window_assigners import (
    EventTimeSessionWindows,
    Trigger,
    WindowAssigner,
)
from flintlock.core.api.window_functions import (
    AggregateContents,
    ListContents,
    ProcessWindowFunction,
    ReduceContents,
    WindowContents,
)
from flintlock.core.errors import GraphError
from flintlock.core.state.aggregate import AggregateFunction

if TYPE_CHECKING:
    from flintlock.core.datastream.datastream import DataStream
    from flintlock.core.exchange.partitioners import Partitioner
    from flintlock.core.plan.graph import Transformation

ACC = TypeVar("ACC")
OUT = TypeVar("OUT")


class WindowedStream:
    """A keyed stream with a window assigner; ``reduce``, ``aggregate`` or ``process``
    turns it back into a stream of one result (or more, from ``process``) per window."""

    def __init__(self, stream: DataStream, assigner: WindowAssigner) -> None:

        where = f"window({assigner!r}) after {stream._follows()}"
        if not isinstance(assigner, WindowAssigner):
            raise GraphError(f"{where}: give a WindowAssigner, e.g. TumblingEventTimeWindows")
        if stream.key_selector is None:
            raise GraphError(f"{where}: windows need a keyed stream: call key_by(...) first")
        if assigner.is_event_time and stream.timestamp_column is None:
            raise GraphError(
                f"{where}: event-time windows need event time: give the source a "
                f"WatermarkStrategy with a timestamp column"
            )
        if assigner.is_event_time:
            stream._check_event_time("window", None)
        self.stream = stream
        self.assigner = assigner
        self._trigger: Trigger | None = None
        self._allowed_lateness = 0
        self._late_tag: OutputTag | None = None

    def trigger(self, trigger: Trigger) -> WindowedStream:
        """Decide when windows fire (default: EventTimeTrigger)."""

        if not isinstance(trigger, Trigger):
            raise GraphError(f"trigger: give a Trigger, not {trigger!r}")
        self._trigger = trigger
        return self

    def allowed_lateness(self, milliseconds: int) -> WindowedStream:
        """Keep windows this long after they fired: a late row fires them again."""
        if not isinstance(milliseconds, int) or isinstance(milliseconds, bool) or milliseconds < 0:
            raise GraphError(f"allowed_lateness must be an int >= 0 (ms), not {milliseconds!r}")
        self._allowed_lateness = milliseconds
        return self

    def side_output_late_data(self, tag: OutputTag) -> WindowedStream:
        """Send rows too late for every window (past the allowed lateness) to side output
        ``tag`` instead of dropping them: ``result.get_side_output(tag)``."""
        self._late_tag = check_tag(tag, "side_output_late_data")
        return self

    def reduce(
        self,
        function: Callable[[Row, Row], Row],
        window_function: ProcessWindowFunction | None = None,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """Fold each window's rows pairwise with ``function(a, b) -> row``; emits the row
        (or hands it to ``window_function`` with the key and window)."""

        if not callable(function):
            raise GraphError(f"reduce: give a function of two rows, not {function!r}")
        self._check_window_function(window_function)
        schema = output_schema if window_function is not None else self.stream.schema
        return self._add(ReduceContents(function, window_function), name, schema)

    def aggregate(
        self,
        function: AggregateFunction[Row, ACC, OUT],
        window_function: ProcessWindowFunction | None = None,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """Aggregate each window incrementally with an AggregateFunction; its result (a
        row) is emitted, or handed to ``window_function`` with the key and window."""

        if not isinstance(function, AggregateFunction):
            raise GraphError(f"aggregate: give an AggregateFunction, not {function!r}")
        self._check_window_function(window_function)
        return self._add(AggregateContents(function, window_function), name, output_schema)

    def process(
        self,
        function: ProcessWindowFunction,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """Hand every row of a firing window to ``function.process(key, ctx, rows, out)``."""

        if not isinstance(function, ProcessWindowFunction):
            raise GraphError(f"process: give a ProcessWindowFunction, not {function!r}")
        return self._add(ListContents(function), name, output_schema)

    def aggregate_columns(
        self,
        aggregates: dict[str, tuple[str, str]],
        name: str | None = None,
        pre_aggregate: bool = True,
    ) -> DataStream:
        """Batch-level: ``{"output": ("column", "count"|"sum"|"min"|"max"|"mean")}`` per key
        and tumbling, sliding or event-time session window, computed with Arrow group-bys
        (no Python per row).

        Emits the key columns, ``window_start``, ``window_end`` and one column per entry
        when the watermark passes the window's end, ordered by window start, then key.
        ``pre_aggregate`` (two-phase, as Flink SQL): each upstream batch becomes partial
        aggregates per (key, window) before the keyed exchange (rows where that would not
        make them fewer), with results equal to the one-phase plan's; it is off with a
        late-data side output, which needs the late rows themselves, and for sessions,
        whose merging is decided after the exchange."""
        stream = self.stream
        where = f"aggregate_columns({name or ''}) after {stream._follows()}"
        if self._trigger is not None or self._allowed_lateness:
            raise GraphError(f"{where}: takes the default trigger and no allowed lateness")
        if not stream.key_selector.columns:  # type: ignore[union-attr]
            raise GraphError(f"{where}: needs a key of columns (key_by a column or columns)")
        if not isinstance(aggregates, dict) or not aggregates:
            raise GraphError(f"{where}: give a dict of output name -> (column, function)")
        schema = stream.schema
        for output, spec in aggregates.items():
            if not (isinstance(spec, tuple) and len(spec) == 2):
                raise GraphError(f"{where}: '{output}' must map to (column, function)")
            if schema is not None and schema.get_field_index(spec[0]) < 0:
                raise GraphError(
                    f"{where}: '{output}' aggregates column '{spec[0]}', which is not in the "
                    f"input; its columns are {schema.names}"
                )
        assigner = self.assigner
        sessions = isinstance(assigner, EventTimeSessionWindows)
        kind = "window_sessions" if sessions else "window_aggregate"
        factory = stream.env.operator(kind)
        key, column = stream.key_selector, stream.timestamp_column
        try:  # check the window shape and functions now, not on the workers
            factory(assigner, aggregates, key, column)
        except ValueError as error:
            raise GraphError(f"{where}: {error}") from None
        late = self._late_tag
        partial = pre_aggregate and late is None and all(s is None for _, _, s in stream.feed)
        partial = partial and not sessions  # a session's rows are not known per batch
        if partial:
            stream = pre_aggregated(stream, aggregates, assigner, name or "window_aggregate")
        fired = stream._then(
            kind,
            name,
            lambda n: factory(
                assigner, aggregates, key, column, name=n, late_tag=late, pre_aggregated=partial
            ),
        )
        # its rows are windows, with the input's event-time column only if one is named so
        outputs = {*(key.columns or ()), *aggregates}  # type: ignore[union-attr]
        fired.timestamp_column = column if column in outputs else None
        return fired

    def _check_window_function(self, function: object) -> None:

        if function is not None and not isinstance(function, ProcessWindowFunction):
            raise GraphError(f"window_function must be a ProcessWindowFunction, not {function!r}")

    def _add(
        self, contents: WindowContents[Any, Any], name: str | None, schema: pa.Schema | None
    ) -> DataStream:
        stream = self.stream
        if schema is not None and not isinstance(schema, pa.Schema):
            raise GraphError(f"window: output_schema must be a pyarrow.Schema, not {schema!r}")
        factory = stream.env.operator("window")
        key, column = stream.key_selector, stream.timestamp_column
        assigner, trigger, lateness = self.assigner, self._trigger, self._allowed_lateness
        late = self._late_tag
        return stream._then(
            "window",
            name,
            lambda n: factory(
                assigner,
                contents,
                key,
                column,
                trigger=trigger,
                allowed_lateness=lateness,
                name=n,
                output_schema=schema,
                late_tag=late,
            ),
            schema=schema,
        )


def pre_aggregated(
    stream: DataStream, aggregates: dict[str, tuple[str, str]], assigner: Any, name: str
) -> DataStream:
    """``stream`` (keyed) with a pre-aggregation chained to each operator feeding it
    (forward, at its parallelism): the exchange then hashes partials by the key columns."""
    from flintlock.core.datastream.datastream import DataStream

    factory = stream.env.operator("window_preaggregate")
    key, column = stream.key_selector, stream.timestamp_column
    feed: list[tuple[Transformation, Partitioner | None, str | None]] = []
    for upstream, partitioner, _ in stream.feed:
        plain = DataStream(stream.env, [(upstream, None, None)], timestamp_column=column)
        pre = plain._then(
            "window_preaggregate",
            f"{name}-preaggregate",
            lambda n: factory(assigner, aggregates, key, column, name=n),
        )
        pre.transformation.parallelism = upstream.parallelism
        pre.transformation.follows_input = True
        feed.append((pre.transformation, partitioner, None))
    return DataStream(stream.env, feed, key_selector=key, timestamp_column=column)
