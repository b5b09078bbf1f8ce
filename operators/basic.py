"""map, filter and flat_map: per batch (fast path) or per record (values as dicts).

``output_schema`` (a pa.Schema; the argument, else the function's attribute) fixes what
map and flat_map emit: per-record rows are built against it, batches are cast to it, and
what does not fit raises a SchemaMismatchError naming the column."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from flintlock import FilterFunction, FlatMapFunction, MapFunction, OneInputStreamOperator, hookimpl
from flintlock.plugin_api import (
    FusedRowsMixin,
    HeldOutputMixin,
    Row,
    RowBatchBuilder,
    RowStage,
    UdfOperatorMixin,
    conform_batch,
    overrides,
    rows_of,
)


class _LambdaMap(MapFunction):
    def __init__(self, fn: Callable[[Row], Row], batch: bool) -> None:
        self.fn = fn
        if batch:
            self.map_batch = fn  # type: ignore[assignment,method-assign]
        else:
            self.map = fn  # type: ignore[assignment,method-assign]


def as_map_function(fn: MapFunction | Callable[[Any], Any], batch: bool = False) -> MapFunction:
    """A MapFunction for a plain callable (per record, or per batch if ``batch``)."""
    return fn if isinstance(fn, MapFunction) else _LambdaMap(fn, batch)


def _is_batch(function: Any, method: str, base: type) -> bool:
    return overrides(function, method, base) or method in vars(function)


def _output_schema(function: Any, declared: pa.Schema | None) -> pa.Schema | None:
    """The schema given as argument, else the one the function declares (or None)."""
    return declared if declared is not None else getattr(function, "output_schema", None)


class MapOperator(
    FusedRowsMixin, HeldOutputMixin, UdfOperatorMixin[MapFunction], OneInputStreamOperator
):
    """Applies a MapFunction: ``map_batch`` if it has one, else ``map`` per record."""

    def __init__(
        self,
        function: MapFunction | Callable[[Row], Row],
        name: str | None = None,
        batch: bool = False,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__(name or "map")
        self.function = as_map_function(function, batch)
        self._per_batch = _is_batch(self.function, "map_batch", MapFunction)
        self.output_schema = _output_schema(self.function, output_schema)
        self._builder = RowBatchBuilder(self.name, self.output_schema)

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if self._per_batch:
            out = self.function.map_batch(batch)
            if self.output_schema is not None:
                out = conform_batch(out, self.output_schema, self.name)
            self.output.emit(out)
            return
        if not batch.num_rows:
            self.emit_empty()
            return
        self.fused_rows().run_batch(batch)

    def accepts_rows(self, output_takes_rows: bool) -> bool:
        """Per-record maps take rows from a per-record operator before them."""
        return not self._per_batch

    def emits_rows(self) -> bool:
        """Per record and no declared schema (that would cast): rows may go on as they are."""
        return not self._per_batch and self.output_schema is None

    def row_stage(self) -> RowStage:
        """This map as a step of a fused run."""
        return RowStage("map", self.function.map, self)

    def finish(self) -> None:
        super().finish()
        self.emit_held()


class _LambdaFilter(FilterFunction):
    def __init__(self, fn: Callable[[Any], Any], batch: bool) -> None:
        if batch:
            self.filter_batch = fn  # type: ignore[assignment,method-assign]
        else:
            self.filter = fn  # type: ignore[assignment,method-assign]


class FilterOperator(FusedRowsMixin, UdfOperatorMixin[FilterFunction], OneInputStreamOperator):
    """Keeps rows where the FilterFunction holds; ``filter_batch`` returns a boolean mask."""

    def __init__(
        self,
        function: FilterFunction | Callable[[Any], Any],
        name: str | None = None,
        batch: bool = False,
    ) -> None:
        super().__init__(name or "filter")
        self.function = (
            function if isinstance(function, FilterFunction) else _LambdaFilter(function, batch)
        )
        self._per_batch = _is_batch(self.function, "filter_batch", FilterFunction)

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if self._per_batch:
            mask = self.function.filter_batch(batch)
        elif self.output.takes_rows and batch.num_rows:
            self.fused_rows().run_batch(batch)
            return
        else:
            fn = self.function.filter
            mask = pa.array([bool(fn(row)) for row in rows_of(batch)], pa.bool_())
        kept = batch.filter(mask)
        if kept.num_rows or not batch.num_rows:  # an empty input batch carries its schema
            self.output.emit(kept)

    def accepts_rows(self, output_takes_rows: bool) -> bool:
        """A per-record filter takes rows when it can hand the rows it keeps on as rows."""
        return not self._per_batch and output_takes_rows

    def emits_rows(self) -> bool:
        """Per record, the rows it keeps may go on as they are."""
        return not self._per_batch

    def row_stage(self) -> RowStage:
        """This filter as a step of a fused run."""
        return RowStage("filter", self.function.filter, self)


class _LambdaFlatMap(FlatMapFunction):
    def __init__(self, fn: Callable[[Any], Any], batch: bool) -> None:
        if batch:
            self.flat_map_batch = fn  # type: ignore[assignment,method-assign]
        else:
            self.flat_map = fn  # type: ignore[assignment,method-assign]


class FlatMapOperator(
    FusedRowsMixin, HeldOutputMixin, UdfOperatorMixin[FlatMapFunction], OneInputStreamOperator
):
    """Zero or more rows per row (per record), or a batch per batch."""

    def __init__(
        self,
        function: FlatMapFunction | Callable[[Any], Iterable[Row]],
        name: str | None = None,
        batch: bool = False,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__(name or "flat_map")
        self.function = (
            function if isinstance(function, FlatMapFunction) else _LambdaFlatMap(function, batch)
        )
        self._per_batch = _is_batch(self.function, "flat_map_batch", FlatMapFunction)
        self.output_schema = _output_schema(self.function, output_schema)
        self._builder = RowBatchBuilder(self.name, self.output_schema)

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if self._per_batch:
            out = self.function.flat_map_batch(batch)
            if out is not None and self.output_schema is not None:
                out = conform_batch(out, self.output_schema, self.name)
        elif batch.num_rows:
            self.fused_rows().run_batch(batch)
            return
        else:
            out = None
        if out is not None and (out.num_rows or not batch.num_rows):
            self.output.emit(out)
        elif not batch.num_rows:
            self.emit_empty()

    def accepts_rows(self, output_takes_rows: bool) -> bool:
        """Per-record flat maps take rows from a per-record operator before them."""
        return not self._per_batch

    def emits_rows(self) -> bool:
        """Per record and no declared schema (that would cast): rows may go on as they are."""
        return not self._per_batch and self.output_schema is None

    def row_stage(self) -> RowStage:
        """This flat map as a step of a fused run."""
        return RowStage("flat_map", self.function.flat_map, self)

    def finish(self) -> None:
        super().finish()
        self.emit_held()


@hookimpl
def flintlock_register_operators(register: Callable[[str, Any], None]) -> None:
    register("map", MapOperator)
    register("filter", FilterOperator)
    register("flat_map", FlatMapOperator)
