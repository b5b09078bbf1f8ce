"""Timers per key, in two time domains (Flink's InternalTimerService): event-time timers
fire as watermarks pass them, processing-time timers as the task's clock does.

Timers are persisted in state, as in Flink: a snapshot writes them as an Arrow file of
(key group, key, timestamp, domain), so they move with their key groups when a job is
restored at another parallelism, and a restore keeps only the key groups it owns."""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

import pyarrow as pa

from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.events import MAX_TIMESTAMP, MIN_TIMESTAMP
from flintlock.core.state.arrow_codec import keys_from_arrow, keys_to_arrow
from flintlock.core.state.backend import KeyedStateBackend

if TYPE_CHECKING:
    from flintlock.core.runtime.processing_time import ProcessingTimeService

OnTimer = Callable[[int, Hashable], None]


class TimeDomain(str, enum.Enum):
    """Which clock a timer follows; ``ctx.time_domain()`` in ``on_timer``."""

    EVENT_TIME = "event_time"
    PROCESSING_TIME = "processing_time"


class _TimerQueue:
    """The timers of one domain: (timestamp, key) once each, popped oldest first
    (ties in registration order)."""

    __slots__ = ("active", "heap", "sequence")

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, Hashable]] = []
        self.active: set[tuple[int, Hashable]] = set()
        self.sequence = itertools.count()

    def add(self, timestamp: int, key: Hashable) -> bool:
        entry, active = (timestamp, key), self.active
        if entry in active:
            return False
        active.add(entry)
        heapq.heappush(self.heap, (timestamp, next(self.sequence), key))
        return True

    def pop_due(self, time: int) -> tuple[int, Hashable] | None:
        """The oldest live timer at or below ``time``, removed; None if there is none."""
        heap, active = self.heap, self.active
        while heap and heap[0][0] <= time:
            timestamp, _, key = heapq.heappop(heap)
            if (timestamp, key) in active:  # else deleted
                active.discard((timestamp, key))
                return timestamp, key
        return None

    def head(self) -> int:
        """The earliest live timer's timestamp (MAX_TIMESTAMP if none)."""
        heap, active = self.heap, self.active
        while heap and (heap[0][0], heap[0][2]) not in active:
            heapq.heappop(heap)
        return heap[0][0] if heap else MAX_TIMESTAMP


class InternalTimerService:
    """The timers of one keyed operator in one subtask, in both time domains.

    A timer is (domain, timestamp, key), registered once however often it is asked for.
    A watermark fires every event-time timer at or below it, the task's clock every
    processing-time timer at or below it, oldest first, with its key current; a timer
    registered while timers fire, at or below the same time, fires in the same pass.
    ``quiesce_processing_time`` (right before the operator's finish, once its due timers
    fired) and ``quiesce`` (the task's timer shutdown) stop firing: timers are still
    accepted and snapshotted.
    """

    def __init__(
        self,
        backend: KeyedStateBackend,
        on_timer: OnTimer,
        on_processing_time: OnTimer | None = None,
    ) -> None:
        self._backend = backend
        self._on_event_time = on_timer
        self._on_processing_time = on_processing_time
        self._after_processing_timers: Callable[[], None] | None = None
        self._event = _TimerQueue()
        self._processing = _TimerQueue()
        self._processing_time: ProcessingTimeService | None = None
        self._quiesced = False
        self._processing_quiesced = False
        self.current_watermark = MIN_TIMESTAMP

    def bind_processing_time(
        self,
        service: ProcessingTimeService,
        on_processing_time: OnTimer,
        after_timers: Callable[[], None] | None = None,
        operator: str = "?",
    ) -> None:
        """Follow the task's clock: fire processing-time timers into ``on_processing_time``,
        then call ``after_timers`` (the operator emits what they produced)."""
        self._processing_time = service
        self._on_processing_time = on_processing_time
        self._after_processing_timers = after_timers
        service.add(self, operator)

    # ---- registration, for the current key ----

    def register_event_time_timer(self, timestamp: int) -> None:
        """Fire ``on_timer(timestamp, key)`` for the current key once the watermark passes."""
        self._event.add(_check_time(timestamp), self._current_key())

    def register_event_time_timer_for(self, key: Hashable, timestamp: int) -> None:
        """``register_event_time_timer`` for ``key`` (a set lookup if it exists), for an
        operator that registers once per window of a batch, not per row."""
        self._event.add(timestamp if type(timestamp) is int else _check_time(timestamp), key)

    def delete_event_time_timer(self, timestamp: int) -> None:
        """Forget the current key's event-time timer at ``timestamp``, if there is one."""
        self._event.active.discard((timestamp, self._current_key()))

    def register_processing_time_timer(self, timestamp: int) -> None:
        """Fire for the current key once the task's clock reaches ``timestamp`` (ms)."""
        added = self._processing.add(_check_time(timestamp), self._current_key())
        if added and self._processing_time is not None:
            self._processing_time.schedule(timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Forget the current key's processing-time timer at ``timestamp``, if there is one."""
        self._processing.active.discard((timestamp, self._current_key()))

    def current_processing_time(self) -> int:
        """The task's clock, in ms."""
        if self._processing_time is None:
            raise RuntimeError("processing time is not bound to this timer service yet")
        return self._processing_time.clock()

    # ---- inspection ----

    def pending(self, domain: TimeDomain | None = None) -> int:
        """How many timers wait to fire (of ``domain``, or of both)."""
        if domain is TimeDomain.EVENT_TIME:
            return len(self._event.active)
        if domain is TimeDomain.PROCESSING_TIME:
            return len(self._processing.active)
        return len(self._event.active) + len(self._processing.active)

    def timers(self, domain: TimeDomain) -> list[tuple[int, Hashable]]:
        """The pending (timestamp, key) timers of ``domain``, in timestamp order."""
        queue = self._event if domain is TimeDomain.EVENT_TIME else self._processing
        return sorted(queue.active, key=lambda t: (t[0], str(t[1])))

    def next_processing_time(self) -> int:
        """The earliest pending processing-time timer (MAX_TIMESTAMP if none or quiesced)."""
        if self._quiesced or self._processing_quiesced:
            return MAX_TIMESTAMP
        return self._processing.head()

    # ---- firing ----

    def advance_watermark(self, watermark: int) -> None:
        """Fire every event-time timer at or below ``watermark``, in timestamp order."""
        self.current_watermark = watermark
        queue, set_key, fire = self._event, self._backend.set_current_key, self._on_event_time
        while not self._quiesced:
            due = queue.pop_due(watermark)
            if due is None:
                return
            set_key(due[1])
            fire(due[0], due[1])

    def advance_processing_time(self, now: int) -> None:
        """Fire every processing-time timer at or below ``now``, in timestamp order."""
        if self._on_processing_time is None:
            return
        queue, set_key, fire = (
            self._processing,
            self._backend.set_current_key,
            self._on_processing_time,
        )
        fired = False
        while not (self._quiesced or self._processing_quiesced):
            due = queue.pop_due(now)
            if due is None:
                break
            fired = True
            set_key(due[1])
            fire(due[0], due[1])
        if fired and self._after_processing_timers is not None:
            self._after_processing_timers()

    def quiesce_processing_time(self) -> None:
        """Stop firing processing-time timers: the operator is about to finish (Flink
        quiesces its processing time service before finish). The chain fires the due ones
        first; those still in the future never fire."""
        self._processing_quiesced = True

    def quiesce(self) -> None:
        """Stop firing: the task shuts its timer service down (timers stay in state)."""
        self._quiesced = True

    # ---- snapshot and restore ----

    def snapshot(self, storage: CheckpointStorage, path: str) -> str | None:
        """Write the pending timers as (key_group, key, timestamp, time_domain) rows; None
        if there are none."""
        rows = [(TimeDomain.EVENT_TIME.value, t) for t in self.timers(TimeDomain.EVENT_TIME)]
        rows += [
            (TimeDomain.PROCESSING_TIME.value, t) for t in self.timers(TimeDomain.PROCESSING_TIME)
        ]
        if not rows:
            return None
        keys = [key for _, (_, key) in rows]
        table = pa.table(
            {
                "key_group": pa.array([self._backend.key_group(k) for k in keys], pa.int32()),
                "key": keys_to_arrow(keys, "timer keys"),
                "timestamp": pa.array([ts for _, (ts, _) in rows], pa.int64()),
                "time_domain": pa.array([domain for domain, _ in rows], pa.string()),
            }
        )
        storage.write_table(path, table)
        return path

    def restore(self, storage: CheckpointStorage, paths: list[str]) -> None:
        """Re-register the timers of ``paths`` whose key group this subtask owns (a file
        without a time_domain column holds event-time timers)."""
        owned = self._backend.key_groups
        for path in paths:
            table = storage.read_table(path)
            domains = (
                table.column("time_domain").to_pylist()
                if "time_domain" in table.column_names
                else [TimeDomain.EVENT_TIME.value] * table.num_rows
            )
            for key_group, key, timestamp, domain in zip(
                table.column("key_group").to_pylist(),
                keys_from_arrow(table.column("key")),
                table.column("timestamp").to_pylist(),
                domains,
                strict=True,
            ):
                if key_group not in owned:
                    continue
                if domain == TimeDomain.PROCESSING_TIME.value:
                    self._processing.add(timestamp, key)
                else:
                    self._event.add(timestamp, key)

    def _current_key(self) -> Hashable:
        key = self._backend.current_key
        if key is None:
            raise RuntimeError("timers need a current key: use them in a keyed operator")
        return key


def _check_time(timestamp: object) -> int:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError(
            f"a timer's timestamp is an int (ms or the column's unit), not {timestamp!r}"
        )
    return timestamp


EventTimeTimerService = InternalTimerService
"""The name ``core/state/handler.py`` builds operators' timer services by."""
