"""State time-to-live (Flink's StateTtlConfig): when keyed state entries expire.

An entry expires once ``last access + ttl <= now`` (Flink's ``TtlUtils.expired``), in
processing time: milliseconds from the backend's clock (the wall clock, or a
``ManualClock`` injected by a harness so that tests never sleep). Expired entries are
never returned, removed when accessed, and left out of snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from flintlock.core.runtime.processing_time import system_clock

"""Processing time in epoch milliseconds."""


wall_clock_ms = system_clock
"""The wall clock in epoch milliseconds: TTL's time outside tests."""


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
