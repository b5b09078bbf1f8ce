"""Watermark strategies: how a source derives event time's progress from its records.

Event time is an integer everywhere in flintlock (watermarks, timers, ``ctx.timestamp()``).
An integer column is used as it is, in whatever unit the job chose; a timestamp column is
converted to **epoch milliseconds** (UTC for zoned timestamps, rounded down to the
millisecond), so its ``max_out_of_orderness`` is milliseconds or a ``timedelta``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.api.watermark_generators import (
    BoundedOutOfOrderness,
    NoWatermarks,
    WatermarkGenerator,
    WithIdleness,
)
from flintlock.core.errors import EventTimeError
from flintlock.core.runtime.processing_time import Clock

_UNITS_PER_MILLI = {"ms": 1, "us": 1000, "ns": 1_000_000}


def is_event_time_type(kind: pa.DataType) -> bool:
    """True for the types an event-time column may have: integers and timestamps."""
    return bool(pa.types.is_integer(kind) or pa.types.is_timestamp(kind))


def event_time_millis(column: pa.Array | pa.ChunkedArray, name: str) -> pa.Array | pa.ChunkedArray:
    """An event-time column as integers: as it is if integer, epoch ms if a timestamp."""
    kind = column.type
    if pa.types.is_integer(kind):
        return column
    _check_type(kind, name)
    raw = column.cast(pa.int64())  # the stored count of the timestamp's unit
    if kind.unit == "s":
        return pc.multiply(raw, 1000)
    per_milli = _UNITS_PER_MILLI[kind.unit]
    if per_milli == 1:
        return raw
    # floor division (pc.divide truncates toward zero): shift negatives down first
    shifted = pc.if_else(pc.less(raw, 0), pc.subtract(raw, per_milli - 1), raw)
    return pc.divide(shifted, per_milli)


def event_times(batch: pa.RecordBatch, name: str) -> list[int | None]:
    """The event time of every row of ``batch`` as Python ints (epoch ms for timestamps)."""
    index = batch.schema.get_field_index(name)
    if index < 0:
        raise EventTimeError(
            f"event-time column '{name}' is not in the batch; its columns are {batch.schema.names}"
        )
    stamps: list[int | None] = event_time_millis(batch.column(index), name).to_pylist()
    return stamps


def _scalar_millis(value: int, kind: pa.DataType) -> int:
    if not pa.types.is_timestamp(kind):
        return value
    if kind.unit == "s":
        return value * 1000
    return value // _UNITS_PER_MILLI[kind.unit]


def _check_type(kind: pa.DataType, name: str) -> None:
    if not is_event_time_type(kind):
        raise EventTimeError(
            f"event-time column '{name}' has type {kind}; it must be an integer or a "
            f"timestamp column"
        )


def as_millis(duration: int | timedelta) -> int:
    """A duration in milliseconds: an int as it is, a timedelta converted."""
    if isinstance(duration, timedelta):
        return duration // timedelta(milliseconds=1)
    return duration


@dataclass(frozen=True)
class WatermarkStrategy:
    """How event time progresses: a timestamp column and a watermark generator (Flink's
    WatermarkStrategy), run over each batch a source (or ``assign_timestamps_and_watermarks``)
    passes on.

    ``WatermarkStrategy("ts", 500)`` is bounded out-of-orderness (Flink's default): the
    watermark is ``max timestamp seen - max_out_of_orderness - 1``. Also
    ``for_monotonous_timestamps``, ``no_watermarks``, ``for_generator`` (your own
    ``WatermarkGenerator``), and the modifiers ``with_idleness`` and ``with_interval``.
    For a timestamp column, timestamps are epoch milliseconds and durations are
    milliseconds (an int) or a ``timedelta``.
    """

    timestamp_column: str | None
    max_out_of_orderness: int | timedelta = 0
    generator: Callable[[], WatermarkGenerator] | None = None
    """A factory of the custom generator (one per subtask); None: bounded out-of-orderness."""
    emits_watermarks: bool = True
    """False for ``no_watermarks``: timestamps only, event time never advances."""
    idle_timeout: int | timedelta | None = None
    """``with_idleness``: processing time (ms) without rows after which the subtask is idle."""
    interval_rows: int | None = None
    """``with_interval(rows=N)``: the periodic emit after every N rows (batches are sliced)."""
    interval_millis: int | None = None
    """``with_interval(millis=N)``: the periodic emit after a batch once N ms passed."""

    def __post_init__(self) -> None:
        column = self.timestamp_column
        if column is not None and (not isinstance(column, str) or not column):
            raise EventTimeError(
                f"WatermarkStrategy: timestamp_column must be a column name, got {column!r}"
            )
        if column is None and self.emits_watermarks:
            raise EventTimeError(
                "WatermarkStrategy: watermarks need a timestamp_column (only no_watermarks() "
                "may go without one)"
            )
        _check_duration(self.max_out_of_orderness, "max_out_of_orderness")
        if self.idle_timeout is not None:
            _check_duration(self.idle_timeout, "idle timeout")
        if self.generator is not None and not callable(self.generator):
            raise EventTimeError(
                f"WatermarkStrategy: generator must be a factory (a class or function "
                f"returning a WatermarkGenerator), not {self.generator!r}"
            )
        for name in ("interval_rows", "interval_millis"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise EventTimeError(f"WatermarkStrategy: {name} must be an int, not {value!r}")
            if value is not None and value < (1 if name == "interval_rows" else 0):
                raise EventTimeError(f"WatermarkStrategy: {name} {value} is too small")

    # ---- Flink's factory methods ----

    @classmethod
    def for_bounded_out_of_orderness(
        cls, timestamp_column: str, max_out_of_orderness: int | timedelta
    ) -> WatermarkStrategy:
        """Watermark = max timestamp seen - max_out_of_orderness - 1."""
        return cls(timestamp_column, max_out_of_orderness)

    @classmethod
    def for_monotonous_timestamps(cls, timestamp_column: str) -> WatermarkStrategy:
        """Timestamps never decrease: watermark = max timestamp seen - 1."""
        return cls(timestamp_column, 0)

    @classmethod
    def no_watermarks(cls, timestamp_column: str | None = None) -> WatermarkStrategy:
        """No watermarks (only MAX_WATERMARK when the input ends); the column, if given,
        still gives ``ctx.timestamp()``."""
        return cls(timestamp_column, emits_watermarks=False)

    @classmethod
    def for_generator(
        cls, generator: Callable[[], WatermarkGenerator], timestamp_column: str
    ) -> WatermarkStrategy:
        """Your own WatermarkGenerator (``on_event`` per batch, ``on_periodic_emit``)."""
        return cls(timestamp_column, generator=generator)

    # ---- modifiers ----

    def with_idleness(self, timeout: int | timedelta) -> WatermarkStrategy:
        """Mark a subtask idle once it read no row for ``timeout`` of processing time, so
        that downstream its channel leaves the watermark min until rows come again."""
        return dataclasses.replace(self, idle_timeout=timeout)

    def with_interval(
        self, rows: int | None = None, millis: int | timedelta | None = None
    ) -> WatermarkStrategy:
        """How often the periodic emit runs: every ``rows`` rows (each batch is sliced, so
        watermarks are finer than the batches), or after a batch once ``millis`` of
        processing time passed (Flink's auto-watermark interval). Default: every batch."""
        if (rows is None) == (millis is None):
            raise EventTimeError("with_interval takes one of rows= or millis=")
        interval = None if millis is None else as_millis(millis)
        return dataclasses.replace(self, interval_rows=rows, interval_millis=interval)

    # ---- use ----

    def create_generator(self, clock: Clock) -> WatermarkGenerator:
        """A fresh generator for one subtask (idleness measured on ``clock``)."""
        generator: WatermarkGenerator
        if not self.emits_watermarks:
            generator = NoWatermarks()
        elif self.generator is not None:
            generator = self.generator()
            if not isinstance(generator, WatermarkGenerator):
                raise EventTimeError(
                    f"WatermarkStrategy: the generator factory returned "
                    f"{type(generator).__name__}, not a WatermarkGenerator"
                )
        else:
            generator = BoundedOutOfOrderness(as_millis(self.max_out_of_orderness))
        if self.idle_timeout is not None:
            generator = WithIdleness(generator, as_millis(self.idle_timeout), clock)
        return generator

    def check_schema(self, schema: pa.Schema, where: str) -> None:
        """An error naming the column if ``schema`` lacks it or it is not integer or timestamp."""
        name = self.timestamp_column
        if name is None:
            return
        index = schema.get_field_index(name)
        if index < 0:
            raise EventTimeError(
                f"{where}: the WatermarkStrategy's timestamp column '{name}' is not in the "
                f"schema; its columns are {schema.names}"
            )
        kind = schema.field(index).type
        if not is_event_time_type(kind):
            raise EventTimeError(
                f"{where}: the WatermarkStrategy's timestamp column '{name}' has type {kind}; "
                f"it must be an integer (any unit) or a timestamp (read as epoch milliseconds)"
            )


def _check_duration(duration: object, what: str) -> None:
    if isinstance(duration, bool) or not isinstance(duration, int | timedelta):
        raise EventTimeError(
            f"WatermarkStrategy: {what} must be an int (the column's unit; milliseconds for "
            f"timestamps) or a timedelta, got {duration!r}"
        )
    if as_millis(duration) < 0:
        raise EventTimeError(f"WatermarkStrategy: {what} {duration!r} is negative")
