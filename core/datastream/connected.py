"""``first.connect(second)``: two streams feeding inputs 1 and 2 of one operator.

Both inputs reach one two-input task as channels of one exchange, tagged with the input
index (a CoProcessFunction's ``process_element1`` / ``process_element2``). The operator is
keyed only when both streams are, since keyed state and timers need a key for every row
of both inputs, on the subtask that owns its key group."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.api.functions import CoProcessFunction
from flintlock.core.datastream.checks import check_function

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
