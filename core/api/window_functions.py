"""What windows hand user code: ProcessWindowFunction and its context, and how a window's
contents grow for reduce, aggregate and process (used by the window operator).

``WindowedStream`` picks the contents for the method called (``reduce``, ``aggregate``,
``process``) and the one window operator takes it: a window's contents are a reduced row,
an accumulator or the rows, kept in keyed MapState alike, so one operator serves all three."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from flintlock.core.api.functions import Collector, Function, Row
from flintlock.core.api.window_assigners import TimeWindow
from flintlock.core.state.aggregate import AggregateFunction

if TYPE_CHECKING:
    from flintlock.core.runtime.operator import StreamOperator

C = TypeVar("C")
"""What a window holds while it is open (a row, an accumulator, the rows)."""
R = TypeVar("R")
"""What a firing window emits, or hands its window function (a row, an aggregate's result)."""
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")


class WindowContext:
    """What a ProcessWindowFunction sees besides the rows: the window and event time."""

    __slots__ = ("_operator", "window")

    def __init__(self, operator: StreamOperator, window: TimeWindow) -> None:
        self._operator = operator
        self.window = window

    def current_watermark(self) -> int:
        """The operator's event-time watermark when the window fired."""
        return self._operator.current_watermark


class ProcessWindowFunction(Function):
    """Called once per firing window with its key, context and rows (all of them, or the
    one aggregate result when used with ``aggregate``/``reduce``)."""

    def process(
        self,
        key: Any,  # the key the stream is keyed by: a column's value, or a tuple of them
        context: WindowContext,
        elements: list[Any],  # rows, or the one result of the window's AggregateFunction
        out: Collector,
    ) -> None:
        """Emit the window's result rows through ``out``."""
        raise NotImplementedError(f"{type(self).__name__} must override process")


class WindowContents(Generic[C, R]):
    """How a window's contents (``C``) grow, merge and turn into output (``R``)."""

    def __init__(self, window_function: ProcessWindowFunction | None) -> None:
        self.window_function = window_function

    def create(self) -> C:
        """Empty contents of a new window."""
        raise NotImplementedError

    def add(self, contents: C, row: Row) -> C:
        """``contents`` with ``row`` added."""
        raise NotImplementedError

    def merge(self, a: C, b: C) -> C:
        """Contents of two merging windows as one."""
        raise NotImplementedError

    def results(self, contents: C) -> list[R]:
        """What the window emits (or hands its window function)."""
        raise NotImplementedError


class ReduceContents(WindowContents[Row | None, Row]):
    """``reduce(a, b) -> row``: the window keeps one row, emitted when it fires."""

    def __init__(
        self, reduce: Callable[[Row, Row], Row], window_function: ProcessWindowFunction | None
    ) -> None:
        super().__init__(window_function)
        self.reduce = reduce

    def create(self) -> Row | None:
        return None

    def add(self, contents: Row | None, row: Row) -> Row:
        return row if contents is None else self.reduce(contents, row)

    def merge(self, a: Row | None, b: Row | None) -> Row | None:
        return a if b is None else b if a is None else self.reduce(a, b)

    def results(self, contents: Row | None) -> list[Row]:
        return [] if contents is None else [contents]


class AggregateContents(WindowContents[ACC, OUT]):
    """An AggregateFunction's accumulator; ``get_result`` when the window fires."""

    def __init__(
        self,
        aggregate: AggregateFunction[Row, ACC, OUT],
        window_function: ProcessWindowFunction | None,
    ) -> None:
        super().__init__(window_function)
        self.aggregate = aggregate

    def create(self) -> ACC:
        return self.aggregate.create_accumulator()

    def add(self, contents: ACC, row: Row) -> ACC:
        return self.aggregate.add(row, contents)

    def merge(self, a: ACC, b: ACC) -> ACC:
        return self.aggregate.merge(a, b)

    def results(self, contents: ACC) -> list[OUT]:
        return [self.aggregate.get_result(contents)]


class ListContents(WindowContents[list[Row], Row]):
    """Every row of the window, for a ProcessWindowFunction."""

    def create(self) -> list[Row]:
        return []

    def add(self, contents: list[Row], row: Row) -> list[Row]:
        contents.append(row)
        return contents

    def merge(self, a: list[Row], b: list[Row]) -> list[Row]:
        return a + b

    def results(self, contents: list[Row]) -> list[Row]:
        return contents
