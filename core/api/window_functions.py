"""What windows hand user code: ProcessWindowFunction and its context, and how a window's
contents grow for reduce, aggregate and process (used by the window operator).

``WindowedStream`` picks the contents for the method called (``reduce``, ``aggregate``,
``process``) and the one window operator takes it: a window's contents are a reduced row,
an accumulator or the rows, kept in keyed MapState alike, so one operator serves all three."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flintlock.core.api.functions import Collector, Function, Row
from flintlock.core.api.window_assigners import TimeWindow
from flintlock.core.state.aggregate import AggregateFunction

if TYPE_CHECKING:
    from flintlock.core.runtime.operator import StreamOperator


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
        self, key: Any, context: WindowContext, elements: list[Any], out: Collector
    ) -> None:
        """Emit the window's result rows through ``out``."""
        raise NotImplementedError(f"{type(self).__name__} must override process")


class WindowContents:
    """How a window's contents grow, merge and turn into output rows."""

    def __init__(self, window_function: ProcessWindowFunction | None) -> None:
        self.window_function = window_function

    def create(self) -> Any:
        """Empty contents of a new window."""
        raise NotImplementedError

    def add(self, contents: Any, row: Row) -> Any:
        """``contents`` with ``row`` added."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """Contents of two merging windows as one."""
        raise NotImplementedError

    def results(self, contents: Any) -> list[Any]:
        """What the window emits (or hands its window function)."""
        raise NotImplementedError


class ReduceContents(WindowContents):
    """``reduce(a, b) -> row``: the window keeps one row, emitted when it fires."""

    def __init__(self, reduce: Callable[[Row, Row], Row], window_function: Any) -> None:
        super().__init__(window_function)
        self.reduce = reduce

    def create(self) -> Any:
        return None

    def add(self, contents: Any, row: Row) -> Any:
        return row if contents is None else self.reduce(contents, row)

    def merge(self, a: Any, b: Any) -> Any:
        return a if b is None else b if a is None else self.reduce(a, b)

    def results(self, contents: Any) -> list[Any]:
        return [] if contents is None else [contents]


class AggregateContents(WindowContents):
    """An AggregateFunction's accumulator; ``get_result`` when the window fires."""

    def __init__(self, aggregate: AggregateFunction[Any, Any, Any], window_function: Any) -> None:
        super().__init__(window_function)
        self.aggregate = aggregate

    def create(self) -> Any:
        return self.aggregate.create_accumulator()

    def add(self, contents: Any, row: Row) -> Any:
        return self.aggregate.add(row, contents)

    def merge(self, a: Any, b: Any) -> Any:
        return self.aggregate.merge(a, b)

    def results(self, contents: Any) -> list[Any]:
        return [self.aggregate.get_result(contents)]


class ListContents(WindowContents):
    """Every row of the window, for a ProcessWindowFunction."""

    def create(self) -> Any:
        return []

    def add(self, contents: list[Row], row: Row) -> list[Row]:
        contents.append(row)
        return contents

    def merge(self, a: list[Row], b: list[Row]) -> list[Row]:
        return a + b

    def results(self, contents: list[Row]) -> list[Row]:
        return contents
