"""The events a task's input delivers: data, watermarks, end of input, barriers.

The one vocabulary between a task and whatever feeds it: the exchange's reader on Spark
and the test harnesses deliver the same events, so a task's code is the same in both
(``core/testing.py``). It sits at core/'s top, importing no room below, because every
room shares it (CONTRIBUTING.md, "Layout")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

MIN_TIMESTAMP = -(2**63)
MAX_TIMESTAMP = 2**63 - 1

SnapshotKind = Literal["checkpoint", "savepoint"]


@dataclass(frozen=True, slots=True)
class Watermark:
    """Event time has reached ``timestamp``: no record with a smaller one will follow."""

    timestamp: int


MAX_WATERMARK = Watermark(MAX_TIMESTAMP)
"""Sent when an input ends: fires every pending event-time timer (FLIP-147)."""


@dataclass(frozen=True, slots=True)
class DataEvent:
    """A batch of records on one channel of one input."""

    batch: pa.RecordBatch
    input_index: int = 1
    channel: int = 0


@dataclass(frozen=True, slots=True)
class WatermarkEvent:
    """A watermark on one channel of one input; the task combines channels by min."""

    watermark: Watermark
    input_index: int = 1
    channel: int = 0


@dataclass(frozen=True, slots=True)
class WatermarkStatusEvent:
    """A channel became idle (its watermark leaves the min) or active again (Flink's
    WatermarkStatus)."""

    idle: bool
    input_index: int = 1
    channel: int = 0


@dataclass(frozen=True, slots=True)
class EndOfInputEvent:
    """A channel will carry no more records (Flink's EndOfData)."""

    input_index: int = 1
    channel: int = 0


@dataclass(frozen=True, slots=True)
class CheckpointBarrier:
    """The end of an epoch: take checkpoint ``checkpoint_id`` now.

    ``final`` marks the last epoch of a job; a final barrier after the input ended is the
    final checkpoint, before it (stop-with-savepoint) the job stops without finish.
    """

    checkpoint_id: int
    kind: SnapshotKind = "checkpoint"
    final: bool = False
    channel: int = 0
    input_index: int = 1


@dataclass(frozen=True, slots=True)
class ProcessingTimeTick:
    """Processing time moved (a harness's ``set_processing_time``): fire due timers."""


InputEvent = (
    DataEvent
    | WatermarkEvent
    | WatermarkStatusEvent
    | EndOfInputEvent
    | CheckpointBarrier
    | ProcessingTimeTick
)
