"""Side outputs (Flink's OutputTag): extra streams a process function emits with
``ctx.output(tag, row)``, read with ``stream.get_side_output(tag)``.

Side batches never chain: they leave the task on the edges of their (operator, tag), on
the same channels (and the same exchange) as the main output, so the main output's path
is untouched. A tag nobody reads is dropped, as in Flink.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.errors import SideOutputError
from flintlock.core.runtime.row_batches import RowBatchBuilder

if TYPE_CHECKING:
    from flintlock.core.api.functions import Row
    from flintlock.core.runtime.output import Output


@dataclass(frozen=True)
class OutputTag:
    """Names a side output; ``schema`` types its rows (else the first rows' types)."""

    name: str
    schema: pa.Schema | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SideOutputError(f"OutputTag: the name must be a non-empty str, not {self.name!r}")
        if self.schema is not None and not isinstance(self.schema, pa.Schema):
            raise SideOutputError(
                f"OutputTag '{self.name}': schema must be a pyarrow.Schema, not {self.schema!r}"
            )


def check_tag(tag: object, where: str) -> OutputTag:
    """``tag`` if it is an OutputTag, else an error naming ``where``."""
    if not isinstance(tag, OutputTag):
        raise SideOutputError(f"{where}: a side output is named by an OutputTag, not {tag!r}")
    return tag


class SideOutputCollector:
    """Rows a per-record function sent to side outputs; built into one batch per tag
    whenever the operator flushes its main output (once per input batch or timer pass)."""

    __slots__ = ("_builders", "_operator", "_tags", "rows")

    def __init__(self, operator_name: str) -> None:
        self._operator = operator_name
        self.rows: dict[str, list[Row]] = {}
        self._tags: dict[str, OutputTag] = {}
        self._builders: dict[str, RowBatchBuilder] = {}

    def add(self, tag: OutputTag, row: Row) -> None:
        """Hold ``row`` for side output ``tag``."""
        rows = self.rows.get(tag.name)
        if rows is None:
            known = self._tags.setdefault(tag.name, check_tag(tag, f"operator '{self._operator}'"))
            if known.schema != tag.schema:
                raise SideOutputError(
                    f"operator '{self._operator}': side output '{tag.name}' is used with two "
                    f"schemas ({known.schema} and {tag.schema}); use one OutputTag"
                )
            rows = self.rows[tag.name] = []
        rows.append(row)

    def flush(self, output: Output) -> None:
        """Emit the held rows, one batch per tag."""
        pending, self.rows = self.rows, {}
        for name, rows in pending.items():
            tag = self._tags[name]
            builder = self._builders.get(name)
            if builder is None:
                label = f"{self._operator}' side output '{name}"
                builder = self._builders[name] = RowBatchBuilder(label, tag.schema)
            batch = builder.build(rows)
            if batch is None:  # an inferred, still null-typed column: emit it as it is
                batch = builder.release_held()
            if batch is not None:
                output.emit_side(tag, batch)
