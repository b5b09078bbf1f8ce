"""``first.connect(second)``: two streams feeding inputs 1 and 2 of one operator.

Both inputs reach one two-input task as channels of one exchange, tagged with the input
index (a CoProcessFunction's ``process_element1`` / ``process_element2``). The operator is
keyed only when both streams are, since keyed state and timers need a key for every row
of both inputs, on the subtask that owns its key group."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.api.functions import CoProcessFunction
from flintlock.core.datastream.checks import check_function
from flintlock.core.errors import GraphError
from flintlock.core.plan.graph import InputEdge
from flintlock.core.runtime.operator import MultipleInputStreamOperator, StreamOperator

if TYPE_CHECKING:
    from flintlock.core.datastream.datastream import DataStream


class ConnectedStreams:
    """Two streams feeding inputs 1 and 2 of one operator."""

    def __init__(self, first: DataStream, second: DataStream) -> None:
        self.first, self.second = first, second

    def process(
        self,
        function: CoProcessFunction,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """A CoProcessFunction; keyed when both streams were keyed.

        ``output_schema`` types what ``out.collect`` emits, as for ``DataStream.map``."""
        check_function("co_process", function, CoProcessFunction, callable_ok=False)
        schema = self.first._output_schema("co_process", name, function, output_schema)
        keys = (self.first.key_selector, self.second.key_selector)
        key_columns = keys if keys[0] is not None and keys[1] is not None else None
        stamps = (self.first.timestamp_column, self.second.timestamp_column)
        factory = self.first.env.operator("co_process")
        return self.first._then_two_input(
            self.second,
            "co_process",
            name,
            lambda label: factory(
                function,
                key_columns=key_columns,
                timestamp_columns=stamps,
                name=label,
                output_schema=output_schema,
            ),
            schema,
        )


class MultipleConnectedStreams:
    """Streams feeding inputs 1..N of one MultipleInputStreamOperator (Flink's
    MultipleInputTransformation): ``a.connect_many(b, c).transform("join3", factory)``.

    Each input comes through the exchange as the stream's own partitioning says (keyed
    by its key_by, else forwarded or rebalanced); the operator runs in the
    ``multiple-input`` task type and heads its own vertex."""

    def __init__(self, streams: list[DataStream]) -> None:
        self.streams = streams

    def transform(
        self,
        name: str,
        operator: Callable[[], MultipleInputStreamOperator],
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """The operator ``operator()`` builds, over the streams in order (input i is the
        i-th stream); it must take exactly that many inputs."""
        from flintlock.core.datastream.datastream import DataStream

        if not callable(operator):
            raise GraphError(
                f"connect_many(...).transform('{name}'): operator must be a factory (a "
                f"callable returning a MultipleInputStreamOperator), not {operator!r}"
            )
        first, count = self.streams[0], len(self.streams)

        def build(label: str) -> StreamOperator:
            made = operator()
            if not isinstance(made, MultipleInputStreamOperator) or made.num_inputs != count:
                raise GraphError(
                    f"connect_many(...).transform('{name}'): the factory must build a "
                    f"MultipleInputStreamOperator of {count} inputs, got "
                    f"{type(made).__name__} of {getattr(made, 'num_inputs', '?')}"
                )
            made.name = label
            return made

        build(name)  # the program's mistake, caught now rather than on a worker
        env = first.env
        label = env._unique(name)
        inputs = [
            InputEdge(t.id, index, p, side)
            for index, stream in enumerate(self.streams, start=1)
            for t, p, side in stream.feed
        ]
        t = env._add(label, lambda: build(label), inputs)
        t.task_type = "multiple-input"
        return DataStream(env, [(t, None, None)], schema=output_schema)
