"""State time-to-live (Flink's StateTtlConfig): when keyed state entries expire.

An entry expires once ``last access + ttl <= now`` (Flink's ``TtlUtils.expired``), in
processing time: milliseconds from the backend's clock (the wall clock, or a
``ManualClock`` injected by a harness so that tests never sleep). Expired entries are
never returned, removed when accessed, and left out of snapshots.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

Clock = Callable[[], int]
"""Processing time in epoch milliseconds."""


def wall_clock_ms() -> int:
    """The wall clock in epoch milliseconds: TTL's time outside tests."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A processing-time clock that moves only when told: deterministic TTL tests."""

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, millis: int) -> None:
        """Move the clock forward by ``millis``."""
        if millis < 0:
            raise ValueError(f"a clock only moves forward; advance({millis})")
        self.now_ms += millis


class UpdateType(Enum):
    """When an entry's last-access timestamp is refreshed (prolonging its life)."""

    OnCreateAndWrite = "OnCreateAndWrite"
    OnReadAndWrite = "OnReadAndWrite"


class StateVisibility(Enum):
    """Whether an expired entry that was not cleaned up yet may be read."""

    NeverReturnExpired = "NeverReturnExpired"


@dataclass(frozen=True)
class StateTtlConfig:
    """Time-to-live of a keyed state's entries (per value, list element or map entry)."""

    ttl_ms: int
    update_type: UpdateType = UpdateType.OnCreateAndWrite
    visibility: StateVisibility = StateVisibility.NeverReturnExpired

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms <= 0:
            raise ValueError(f"StateTtlConfig: ttl_ms must be an int > 0, not {self.ttl_ms!r}")
        if not isinstance(self.update_type, UpdateType):
            raise ValueError(
                f"StateTtlConfig: update_type {self.update_type!r} is not an UpdateType"
            )
        if not isinstance(self.visibility, StateVisibility):
            raise ValueError(
                f"StateTtlConfig: visibility {self.visibility!r} is not a StateVisibility"
            )

    @property
    def refresh_on_read(self) -> bool:
        """True if reading an entry refreshes its timestamp (OnReadAndWrite)."""
        return self.update_type is UpdateType.OnReadAndWrite
