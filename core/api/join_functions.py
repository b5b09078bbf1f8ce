"""What joins of two keyed streams hand user code (Flink's ProcessJoinFunction and
JoinFunction), and the builders ``interval_join`` and ``join`` return.

The builders check, as the program is built, that both sides are keyed and carry event
time, which the join operators need to buffer rows in keyed state and drop them with
event-time timers; the operator itself is found by name (``env.operator``), so core never
imports operators/."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.api.functions import Collector, Function, Row
from flintlock.core.api.window_assigners import WindowAssigner
from flintlock.core.errors import GraphError

if TYPE_CHECKING:
    from flintlock.core.datastream.datastream import DataStream, Key


class JoinContext:
    """The timestamps of a joined pair; the pair's own timestamp is the larger one."""

    __slots__ = ("key", "left_timestamp", "right_timestamp")

    def __init__(self) -> None:
        self.key: Any = None
        self.left_timestamp = 0
        self.right_timestamp = 0

    def timestamp(self) -> int:
        """The joined pair's event time: the later of the two rows'."""
        return max(self.left_timestamp, self.right_timestamp)

    def get_current_key(self) -> Any:
        """The key both rows share."""
        return self.key


class ProcessJoinFunction(Function):
    """Called once per matching (left, right) pair of an interval join."""

    def process_element(self, left: Row, right: Row, ctx: JoinContext, out: Collector) -> None:
        """Emit the pair's result rows through ``out``."""
        raise NotImplementedError(f"{type(self).__name__} must override process_element")


def _check_keyed_with_time(stream: DataStream, side: str, method: str) -> None:
    if stream.key_selector is None:
        raise GraphError(f"{method}: the {side} stream must be keyed: call key_by(...) first")
    if stream.timestamp_column is None:
        raise GraphError(
            f"{method}: the {side} stream has no event time: give its source a "
            f"WatermarkStrategy with a timestamp column"
        )


def _join(
    left: DataStream,
    right: DataStream,
    kind: str,
    name: str | None,
    schema: pa.Schema | None,
    function: Any,
    shape: Any,
) -> DataStream:
    """The join operator ``kind`` of two keyed streams; ``shape`` is its bounds or its
    window assigner."""
    factory = left.env.operator(kind)
    keys = (left.key_selector, right.key_selector)
    stamps = (left.timestamp_column, right.timestamp_column)
    return left._then_two_input(
        right,
        kind,
        name,
        lambda label: factory(function, keys, stamps, shape, name=label, output_schema=schema),
        schema,
    )


class IntervalJoin:
    """``left.interval_join(right).between(lower, upper).process(fn)``: pairs whose right
    timestamp lies in [left + lower, left + upper] (both keyed by the same key)."""

    def __init__(self, left: DataStream, right: DataStream) -> None:
        _check_keyed_with_time(left, "left", "interval_join")
        _check_keyed_with_time(right, "right", "interval_join")
        self.left, self.right = left, right
        self.bounds: tuple[int, int] | None = None

    def between(self, lower: int, upper: int) -> IntervalJoin:
        """The right row's time relative to the left row's, in ms, both ends included."""
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in (lower, upper)):
            raise GraphError(
                f"interval_join.between: bounds must be ints (ms), not {lower!r}, {upper!r}"
            )
        if lower > upper:
            raise GraphError(f"interval_join.between: lower bound {lower} > upper bound {upper}")
        self.bounds = (lower, upper)
        return self

    def process(
        self,
        function: ProcessJoinFunction,
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """Call ``function.process_element(left, right, ctx, out)`` per matching pair."""
        if self.bounds is None:
            raise GraphError("interval_join: call between(lower, upper) before process")
        if not isinstance(function, ProcessJoinFunction):
            raise GraphError(f"interval_join.process: give a ProcessJoinFunction, not {function!r}")
        return _join(
            self.left, self.right, "interval_join", name, output_schema, function, self.bounds
        )


class WindowJoin:
    """``left.join(right).where(key).equal_to(key).window(assigner).apply(fn)``: every
    pair of rows with equal keys in the same window, joined when the window fires."""

    def __init__(self, left: DataStream, right: DataStream) -> None:
        self.left, self.right = left, right
        self.assigner: WindowAssigner | None = None

    def where(self, key: Key) -> WindowJoin:
        """The left stream's key (a column, columns or a key selector)."""
        self.left = self.left.key_by(key)
        return self

    def equal_to(self, key: Key) -> WindowJoin:
        """The right stream's key."""
        self.right = self.right.key_by(key)
        return self

    def window(self, assigner: WindowAssigner) -> WindowJoin:
        """Tumbling or sliding event-time windows."""
        if not isinstance(assigner, WindowAssigner):
            raise GraphError(f"join.window: give a WindowAssigner, not {assigner!r}")
        if assigner.merging:
            raise GraphError("join.window: session windows are not supported in joins yet")
        self.assigner = assigner
        return self

    def apply(
        self,
        function: Callable[[Row, Row], Row],
        name: str | None = None,
        output_schema: pa.Schema | None = None,
    ) -> DataStream:
        """``function(left, right) -> row`` per pair of a firing window."""
        _check_keyed_with_time(self.left, "left", "join (call where(...))")
        _check_keyed_with_time(self.right, "right", "join (call equal_to(...))")
        if self.assigner is None:
            raise GraphError("join: call window(assigner) before apply")
        if not callable(function):
            raise GraphError(f"join.apply: give a function of (left, right), not {function!r}")
        return _join(
            self.left, self.right, "window_join", name, output_schema, function, self.assigner
        )
