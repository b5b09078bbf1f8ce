"""Event-time windows (Flink's TimeWindow and window assigners) and their triggers.

Named and spelled as Flink's (``TumblingEventTimeWindows.of(1000)``) for a Flink user;
they are part of the user API because the program hands them to ``keyed.window(...)``,
and the window operator, found by name through the registry, receives them as they are."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from flintlock.core.errors import WindowDefinitionError


@dataclass(frozen=True, order=True)
class TimeWindow:
    """The event-time interval ``[start, end)`` in epoch milliseconds."""

    start: int
    end: int

    def max_timestamp(self) -> int:
        """The largest timestamp in the window: its event-time timer fires there."""
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        """True if the windows overlap or touch (session windows merge then)."""
        return self.start <= other.end and other.start <= self.end

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The smallest window holding both."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))


def window_start(timestamp: int, offset: int, size: int) -> int:
    """The start of the ``size``-long window (aligned to ``offset``) holding ``timestamp``."""
    return timestamp - (timestamp - offset + size) % size


def _positive(value: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise WindowDefinitionError(f"{what} must be a positive int of milliseconds, not {value!r}")
    return value


def _offset(offset: int, period: int, what: str) -> int:
    if not isinstance(offset, int) or isinstance(offset, bool) or not abs(offset) < period:
        raise WindowDefinitionError(
            f"window offset must be an int of milliseconds with |offset| < {what} "
            f"({period}), not {offset!r}"
        )
    return offset


class WindowAssigner(ABC):
    """Puts each timestamp into windows; ``merging`` assigners' windows merge (sessions)."""

    merging = False
    is_event_time = True
    """False: windows by processing time (the operator's clock when a row arrives)."""
    window_size: int | None = None
    """The length of every window it makes, if fixed (not for sessions)."""

    @abstractmethod
    def assign(self, timestamp: int) -> list[TimeWindow]:
        """The windows ``timestamp`` belongs to."""

    @abstractmethod
    def describe(self) -> str:
        """For names and errors, e.g. ``'tumbling 1000 ms'``."""


class TumblingEventTimeWindows(WindowAssigner):
    """Fixed-size, non-overlapping windows of ``size`` ms, aligned to ``offset``."""

    def __init__(self, size: int, offset: int = 0) -> None:
        self.size = self.window_size = _positive(size, "tumbling window size")
        self.offset = _offset(offset, size, "size")

    @classmethod
    def of(cls, size: int, offset: int = 0) -> TumblingEventTimeWindows:
        """Flink's spelling: ``TumblingEventTimeWindows.of(1000)``."""
        return cls(size, offset)

    def assign(self, timestamp: int) -> list[TimeWindow]:
        start = window_start(timestamp, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def describe(self) -> str:
        return f"tumbling {self.size} ms"


class TumblingProcessingTimeWindows(TumblingEventTimeWindows):
    """Fixed-size windows of processing time: a row belongs to the window of the moment
    the operator sees it; a window fires when the clock passes its end."""

    is_event_time = False

    @classmethod
    def of(cls, size: int, offset: int = 0) -> TumblingProcessingTimeWindows:
        """Flink's spelling: ``TumblingProcessingTimeWindows.of(1000)``."""
        return cls(size, offset)

    def describe(self) -> str:
        return f"tumbling {self.size} ms of processing time"


class SlidingEventTimeWindows(WindowAssigner):
    """Windows of ``size`` ms starting every ``slide`` ms: a row is in size/slide of them."""

    def __init__(self, size: int, slide: int, offset: int = 0) -> None:
        self.size = self.window_size = _positive(size, "sliding window size")
        self.slide = _positive(slide, "sliding window slide")
        self.offset = _offset(offset, self.slide, "slide")

    @classmethod
    def of(cls, size: int, slide: int, offset: int = 0) -> SlidingEventTimeWindows:
        """Flink's spelling: ``SlidingEventTimeWindows.of(1000, 250)``."""
        return cls(size, slide, offset)

    def assign(self, timestamp: int) -> list[TimeWindow]:
        last = window_start(timestamp, self.offset, self.slide)
        starts = range(last, timestamp - self.size, -self.slide)
        return [TimeWindow(start, start + self.size) for start in starts]

    def describe(self) -> str:
        return f"sliding {self.size} ms every {self.slide} ms"


class EventTimeSessionWindows(WindowAssigner):
    """A key's rows closer than ``gap`` ms to each other form one session window."""

    merging = True

    def __init__(self, gap: int) -> None:
        self.gap = _positive(gap, "session gap")

    @classmethod
    def with_gap(cls, gap: int) -> EventTimeSessionWindows:
        """Flink's spelling: ``EventTimeSessionWindows.with_gap(500)``."""
        return cls(gap)

    def assign(self, timestamp: int) -> list[TimeWindow]:
        return [TimeWindow(timestamp, timestamp + self.gap)]

    def describe(self) -> str:
        return f"sessions with a {self.gap} ms gap"


class TriggerResult(Enum):
    """What a trigger asks of the window: nothing, emit, drop its contents, or both."""

    CONTINUE = (False, False)
    FIRE = (True, False)
    PURGE = (False, True)
    FIRE_AND_PURGE = (True, True)

    @property
    def fires(self) -> bool:
        """The window's result is emitted."""
        return self.value[0]

    @property
    def purges(self) -> bool:
        """The window's contents are dropped."""
        return self.value[1]


class TriggerContext(Protocol):
    """What a trigger may use: the watermark and the current key's event-time timers."""

    def current_watermark(self) -> int: ...

    def current_processing_time(self) -> int: ...

    def register_event_time_timer(self, timestamp: int) -> None: ...

    def delete_event_time_timer(self, timestamp: int) -> None: ...

    def register_processing_time_timer(self, timestamp: int) -> None: ...

    def delete_processing_time_timer(self, timestamp: int) -> None: ...


class Trigger:
    """Decides when a window emits (Flink's Trigger, event time)."""

    def on_element(self, timestamp: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        """A row was added to ``window``."""
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        """An event-time timer of ``window``'s key fired at ``time``."""
        return TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        """A processing-time timer of ``window``'s key fired at ``time``."""
        return TriggerResult.CONTINUE

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        """Windows were merged into ``window`` (session windows)."""

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        """``window`` is gone: delete what the trigger registered for it."""


class EventTimeTrigger(Trigger):
    """Fires once the watermark passes the window's end; at once for a late row within
    the allowed lateness (the default trigger of event-time windows)."""

    def on_element(self, timestamp: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        if window.max_timestamp() > ctx.current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())


class ProcessingTimeTrigger(Trigger):
    """Fires when the processing-time clock passes the window's end (the default trigger
    of processing-time windows)."""

    def on_element(self, timestamp: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return TriggerResult.FIRE

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())
