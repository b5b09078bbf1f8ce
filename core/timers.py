"""Event-time timers per key: registered by user code, fired in timestamp order by watermarks."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flintlock.core.checkpoint_storage import CheckpointStorage
from flintlock.core.events import MIN_TIMESTAMP
from flintlock.core.state.arrow_codec import keys_from_arrow, keys_to_arrow
from flintlock.core.state.backend import KeyedStateBackend

OnTimer = Callable[[int, Any], None]


class EventTimeTimerService:
    """The event-time timers of one keyed operator in one subtask.

    A timer is (timestamp, key), registered once however often it is asked for; a
    watermark fires every timer at or below it, oldest first, with its key current.
    After ``quiesce`` (the task's timer shutdown) timers are accepted and never fire.
    """

    def __init__(self, backend: KeyedStateBackend, on_timer: OnTimer) -> None:
        self._backend = backend
        self._on_timer = on_timer
        self._heap: list[tuple[int, int, Any]] = []
        self._active: set[tuple[int, Any]] = set()
        self._sequence = itertools.count()
        self._quiesced = False
        self.current_watermark = MIN_TIMESTAMP

    def register_event_time_timer(self, timestamp: int) -> None:
        """Fire ``on_timer(timestamp, key)`` for the current key once the watermark passes."""
        key = self._current_key()
        if (timestamp, key) not in self._active:
            self._active.add((timestamp, key))
            heapq.heappush(self._heap, (timestamp, next(self._sequence), key))

    def delete_event_time_timer(self, timestamp: int) -> None:
        """Forget the current key's timer at ``timestamp``, if there is one."""
        self._active.discard((timestamp, self._current_key()))

    def pending(self) -> int:
        """How many timers wait to fire."""
        return len(self._active)

    def advance_watermark(self, watermark: int) -> None:
        """Fire every timer at or below ``watermark``, in timestamp order."""
        self.current_watermark = watermark
        heap, active = self._heap, self._active
        while heap and heap[0][0] <= watermark and not self._quiesced:
            timestamp, _, key = heapq.heappop(heap)
            if (timestamp, key) not in active:
                continue  # deleted
            active.discard((timestamp, key))
            self._backend.set_current_key(key)
            self._on_timer(timestamp, key)

    def quiesce(self) -> None:
        """Stop firing: the task shuts its timer service down (timers stay in state)."""
        self._quiesced = True

    def snapshot(self, storage: CheckpointStorage, path: str) -> str | None:
        """Write the pending timers as (key_group, key, timestamp) rows; None if empty."""
        if not self._active:
            return None
        timers = sorted(self._active, key=lambda t: (t[0], str(t[1])))
        keys = [key for _, key in timers]
        table = pa.table(
            {
                "key_group": pa.array([self._backend.key_group(k) for k in keys], pa.int32()),
                "key": keys_to_arrow(keys, "timer keys"),
                "timestamp": pa.array([ts for ts, _ in timers], pa.int64()),
            }
        )
        storage.write_table(path, table)
        return path

    def restore(self, storage: CheckpointStorage, paths: list[str]) -> None:
        """Re-register the timers of ``paths`` whose key group this subtask owns."""
        owned = self._backend.key_groups
        for path in paths:
            table = storage.read_table(path)
            for key_group, key, timestamp in zip(
                table.column("key_group").to_pylist(),
                keys_from_arrow(table.column("key")),
                table.column("timestamp").to_pylist(),
                strict=True,
            ):
                if key_group in owned and (timestamp, key) not in self._active:
                    self._active.add((timestamp, key))
                    heapq.heappush(self._heap, (timestamp, next(self._sequence), key))

    def _current_key(self) -> Any:
        key = self._backend.current_key
        if key is None:
            raise RuntimeError("timers need a current key: use them in a keyed operator")
        return key
