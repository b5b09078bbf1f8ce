"""A stream's place in the program being built: what feeds it, its key, event-time column
and schema, and how a new operator is attached after it, with the checks made as it is.

``DataStream`` (datastream.py) is the user's side of the same object: its methods say
which operator to attach; the attaching and checking is here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.api.keys import ColumnKey, ColumnsKey, FunctionKey, KeySelector
from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.datastream.checks import check_one_argument
from flintlock.core.errors import GraphError
from flintlock.core.exchange.murmur import is_key_type
from flintlock.core.exchange.partitioners import Partitioner
from flintlock.core.plan.graph import InputEdge, Transformation
from flintlock.core.runtime.operator import StreamOperator

if TYPE_CHECKING:
    from flintlock.core.datastream.datastream import DataStream
    from flintlock.core.datastream.environment import StreamExecutionEnvironment

Feed = list[tuple[Transformation, Partitioner | None, str | None]]
"""(upstream, partitioner, side output tag name or None for the main output) per input."""


class BuildingStream:
    """What a stream is while the program is built; ``DataStream`` adds the user's methods."""

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        feed: Feed,
        key_column: str | None = None,
        timestamp_column: str | None = None,
        schema: pa.Schema | None = None,
        key_selector: KeySelector | None = None,
    ) -> None:
        self.env = env
        self.feed = feed
        if key_selector is None and key_column is not None:
            key_selector = ColumnKey(key_column)
        self.key_selector = key_selector
        self.timestamp_column = timestamp_column
        self.schema = schema

    @property
    def key_column(self) -> str | None:
        """The key column of a stream keyed by one column (else None)."""
        return self.key_selector.column if isinstance(self.key_selector, ColumnKey) else None

    @property
    def transformation(self) -> Transformation:
        """The transformation producing this stream (not defined for a union)."""
        if len(self.feed) != 1:
            raise GraphError("a union of streams has no single transformation")
        if self.feed[0][2] is not None:
            raise GraphError(
                f"side output '{self.feed[0][2]}' of '{self.feed[0][0].name}' has no operator "
                f"of its own: set parallelism or task type on the operator that reads it"
            )
        return self.feed[0][0]

    def _then(
        self,
        kind: str,
        name: str | None,
        build: Callable[[str], StreamOperator],
        sink: TwoPhaseCommitSink[Any, Any] | None = None,
        is_sink: bool = False,
        schema: pa.Schema | None = None,
    ) -> DataStream:
        from flintlock.core.datastream.datastream import DataStream

        label = self.env._unique(name or kind)
        inputs = [InputEdge(t.id, 1, p, side) for t, p, side in self.feed]
        t = self.env._add(label, lambda: build(label), inputs, sink=sink, is_sink=is_sink)
        return DataStream(
            self.env, [(t, None, None)], timestamp_column=self.timestamp_column, schema=schema
        )

    def _then_two_input(
        self,
        second: DataStream,
        kind: str,
        name: str | None,
        build: Callable[[str], StreamOperator],
        schema: pa.Schema | None = None,
        second_partitioner: Partitioner | None = None,
    ) -> DataStream:
        """A two-input operator: this stream feeds input 1, ``second`` input 2 (through
        ``second_partitioner`` if given, e.g. broadcast)."""
        from flintlock.core.datastream.datastream import DataStream

        env = self.env
        label = env._unique(name or kind)
        inputs = [InputEdge(t.id, 1, p, side) for t, p, side in self.feed] + [
            InputEdge(t.id, 2, second_partitioner or p, side) for t, p, side in second.feed
        ]
        t = env._add(label, lambda: build(label), inputs)
        return DataStream(env, [(t, None, None)], schema=schema)

    def _follows(self) -> str:
        """The operators this stream comes out of, for messages."""
        return " and ".join(f"'{t.name}'" for t, *_ in self.feed)

    def _output_schema(
        self, method: str, name: str | None, function: Any, declared: pa.Schema | None
    ) -> pa.Schema | None:
        """The schema the new operator's output will have: declared, or the function's own."""
        if declared is not None and not isinstance(declared, pa.Schema):
            raise GraphError(
                f"{method}({name or ''}) after {self._follows()}: output_schema must be a "
                f"pyarrow.Schema, not {declared!r}"
            )
        own = declared if declared is not None else getattr(function, "output_schema", None)
        return own if isinstance(own, pa.Schema) else None

    def _check_event_time(self, method: str, name: str | None) -> None:
        column, schema = self.timestamp_column, self.schema
        if column is not None and schema is not None and schema.get_field_index(column) < 0:
            raise GraphError(
                f"{method}({name or ''}) after {self._follows()}: the event-time column "
                f"'{column}' (the source's WatermarkStrategy) is not in its input, whose "
                f"columns are {schema.names}; keep it in the output_schema of the operators "
                f"before"
            )

    def _key_selector(self, key: Any) -> KeySelector:
        """The KeySelector for ``key_by``'s argument, checked against the known schema."""
        where = f"key_by({key!r}) after {self._follows()}"
        if isinstance(key, KeySelector):
            selector = key
        elif isinstance(key, str):
            if not key:
                raise GraphError(f"{where}: the key column name is empty")
            selector = ColumnKey(key)
        elif isinstance(key, list | tuple):
            if not key:
                raise GraphError(f"{where}: the list of key columns is empty")
            wrong = [c for c in key if not isinstance(c, str) or not c]
            if wrong:
                raise GraphError(f"{where}: key columns are column names; {wrong[0]!r} is not")
            twice = sorted({c for c in key if key.count(c) > 1})
            if twice:
                raise GraphError(f"{where}: key column(s) {twice} appear more than once")
            selector = ColumnsKey(key)
        elif callable(key):
            check_one_argument(key, where)
            selector = FunctionKey(key)
        else:
            raise GraphError(
                f"{where}: a key is a column name, a list of column names or a key selector "
                f"(a KeySelector, or a function of the row returning the key), not "
                f"{type(key).__name__}"
            )
        if self.schema is not None and selector.columns is not None:
            self._check_key_columns(selector.columns, where)
        return selector

    def _check_key_columns(self, columns: Sequence[str], where: str) -> None:
        schema = self.schema
        assert schema is not None
        missing = [c for c in columns if schema.get_field_index(c) < 0]
        if missing:
            which = f"column '{missing[0]}' is" if len(missing) == 1 else f"columns {missing} are"
            raise GraphError(
                f"{where}: key {which} not in its schema; its columns are {schema.names}"
            )
        for column in columns:
            kind = schema.field(column).type
            if not is_key_type(kind):
                raise GraphError(
                    f"{where}: key column '{column}' has type {kind}, which cannot be hashed "
                    f"stably; key by int, str, bytes or bool columns (or a key selector "
                    f"returning such values)"
                )
