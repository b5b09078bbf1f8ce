"""When an unbounded job starts its epochs (Spark Structured Streaming's triggers).

An unbounded job is a sequence of epochs, each one Spark job ending in a checkpoint, so
when the next one starts is the driver's choice; it is offered in the terms a PySpark user
already knows from ``writeStream.trigger``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from flintlock.core.errors import GraphError

TriggerKind = Literal["processing_time", "available_now", "once"]


@dataclass(frozen=True)
class EpochTrigger:
    """``processing_time(s)``: an epoch every ``s`` seconds until stopped;
    ``available_now()``: epochs until what is available now is read, then stop;
    ``once()``: one epoch, then stop. A stopped job continues from its last checkpoint
    at its next start."""

    kind: TriggerKind = "processing_time"
    interval_seconds: float = 1.0

    @staticmethod
    def processing_time(seconds: float) -> EpochTrigger:
        """An epoch every ``seconds`` (start to start; back to back if one runs longer)."""
        if not isinstance(seconds, int | float) or not seconds >= 0:
            raise GraphError(f"a processing-time trigger needs seconds >= 0, got {seconds!r}")
        return EpochTrigger("processing_time", float(seconds))

    @staticmethod
    def available_now() -> EpochTrigger:
        """Epochs back to back until the sources have nothing more right now; then stop."""
        return EpochTrigger("available_now", 0.0)

    @staticmethod
    def once() -> EpochTrigger:
        """One epoch over what is available, then stop."""
        return EpochTrigger("once", 0.0)
