"""Processing time: the clock a task's processing-time timers follow (wall clock by default,
a ManualClock in tests), and the task-wide check that fires them between batches.

A task's code runs as one plain function with no timer thread, so due timers fire between
batches, and the check after each batch is one comparison with the earliest timer of any
operator; due timers are put in the task's mailbox, behind the mails already waiting.
The clock is injected, so tests move processing time by hand and never sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from flintlock.core.events import MAX_TIMESTAMP
from flintlock.core.runtime.mailbox import Mail

if TYPE_CHECKING:
    from flintlock.core.runtime.mailbox import TaskMailbox
    from flintlock.core.runtime.timers import InternalTimerService

Clock = Callable[[], int]
"""Returns processing time in epoch milliseconds."""


def system_clock() -> int:
    """The wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock moved by hand: deterministic processing time for tests (the harness's
    ``set_processing_time``). It never goes back."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def set(self, now: int) -> None:
        """Move the clock to ``now`` (ms); moving it back is an error."""
        if now < self.now:
            raise ValueError(f"processing time cannot go back from {self.now} to {now}")
        self.now = now

    def advance(self, millis: int) -> None:
        """Move the clock ``millis`` ms forward."""
        self.set(self.now + millis)


class ProcessingTimeService:
    """One task's processing time: its clock, and the earliest processing-time timer of
    any of its operators, so the check after each batch costs one comparison.

    With a mailbox, due timers are delivered through it (Flink's timers are mails): one
    mail per operator whose timers are due, queued after the mails already waiting."""

    def __init__(self, clock: Clock = system_clock, mailbox: TaskMailbox | None = None) -> None:
        self.clock = clock
        self.mailbox = mailbox
        self.next_due = MAX_TIMESTAMP
        self._services: list[tuple[InternalTimerService, str]] = []
        self._queued: set[int] = set()  # services whose timer mail waits to run

    def add(self, service: InternalTimerService, operator: str = "?") -> None:
        """Follow ``service``'s processing-time timers (``operator``'s, named on errors)."""
        self._services.append((service, operator))
        self.schedule(service.next_processing_time())

    def schedule(self, timestamp: int) -> None:
        """A timer at ``timestamp`` was registered somewhere in the task."""
        if timestamp < self.next_due:
            self.next_due = timestamp

    def fire_due(self) -> None:
        """Fire every processing-time timer whose time has come (one comparison if none)."""
        if self.next_due == MAX_TIMESTAMP or self.next_due > self.clock():
            return
        now = self.clock()
        mailbox = self.mailbox
        if mailbox is None:
            for service, _ in self._services:
                service.advance_processing_time(now)
        else:
            for index, (service, operator) in enumerate(self._services):
                if index not in self._queued and service.next_processing_time() <= now:
                    self._queued.add(index)
                    fire = partial(self._fire_mail, index, service, now)
                    mailbox.put(Mail(fire, "processing-time timers", operator))
        self.next_due = min(
            (
                s.next_processing_time()
                for i, (s, _) in enumerate(self._services)
                if i not in self._queued
            ),
            default=MAX_TIMESTAMP,
        )

    def _fire_mail(self, index: int, service: InternalTimerService, now: int) -> None:
        """The mail of ``service``'s due timers: fire those at or below ``now``."""
        self._queued.discard(index)
        service.advance_processing_time(now)
        self.schedule(service.next_processing_time())
