"""Watermark strategies: how a source derives event time's progress from its records.

Event time is an integer everywhere in flintlock (watermarks, timers, ``ctx.timestamp()``).
An integer column is used as it is, in whatever unit the job chose; a timestamp column is
converted to **epoch milliseconds** (UTC for zoned timestamps, rounded down to the
millisecond), so its ``max_out_of_orderness`` is milliseconds or a ``timedelta``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.errors import FlintlockError

_UNITS_PER_MILLI = {"ms": 1, "us": 1000, "ns": 1_000_000}


class EventTimeError(FlintlockError):
    """An event-time column is missing or not of an integer or timestamp type."""


def is_event_time_type(kind: pa.DataType) -> bool:
    """True for the types an event-time column may have: integers and timestamps."""
    return pa.types.is_integer(kind) or pa.types.is_timestamp(kind)


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
    return event_time_millis(batch.column(index), name).to_pylist()


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
    """Bounded out-of-orderness over an integer or timestamp column (Flink's default).

    After each batch the watermark is ``max timestamp seen - max_out_of_orderness - 1``.
    For a timestamp column, timestamps are epoch milliseconds and ``max_out_of_orderness``
    is milliseconds (an int) or a ``timedelta``.
    """

    timestamp_column: str
    max_out_of_orderness: int | timedelta = 0

    def __post_init__(self) -> None:
        if not isinstance(self.timestamp_column, str) or not self.timestamp_column:
            raise EventTimeError(
                f"WatermarkStrategy: timestamp_column must be a column name, got "
                f"{self.timestamp_column!r}"
            )
        out_of_orderness = self.max_out_of_orderness
        if isinstance(out_of_orderness, bool) or not isinstance(out_of_orderness, int | timedelta):
            raise EventTimeError(
                f"WatermarkStrategy: max_out_of_orderness must be an int (the column's unit; "
                f"milliseconds for timestamps) or a timedelta, got {out_of_orderness!r}"
            )
        if as_millis(out_of_orderness) < 0:
            raise EventTimeError(
                f"WatermarkStrategy: max_out_of_orderness {out_of_orderness!r} is negative"
            )

    def check_schema(self, schema: pa.Schema, where: str) -> None:
        """An error naming the column if ``schema`` lacks it or it is not integer or timestamp."""
        name = self.timestamp_column
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

    def watermark_after(self, batch: pa.RecordBatch, previous_max: int | None) -> int | None:
        """The highest timestamp seen so far, including ``batch`` (one compute call)."""
        if batch.num_rows == 0:
            return previous_max
        name = self.timestamp_column
        index = batch.schema.get_field_index(name)
        if index < 0:
            raise EventTimeError(
                f"the WatermarkStrategy's timestamp column '{name}' is not in the source's "
                f"batch; its columns are {batch.schema.names}"
            )
        column = batch.column(index)
        _check_type(column.type, name)
        highest = pc.max(column)
        if not highest.is_valid:
            return previous_max
        raw = highest.value if pa.types.is_timestamp(column.type) else highest.as_py()
        batch_max = _scalar_millis(raw, column.type)
        return batch_max if previous_max is None else max(previous_max, batch_max)

    def watermark_for(self, max_timestamp: int) -> int:
        """The watermark once ``max_timestamp`` has been seen."""
        return max_timestamp - as_millis(self.max_out_of_orderness) - 1
