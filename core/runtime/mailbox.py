"""The task's mailbox (Flink's MailboxExecutor): actions that run on the task's thread.

An operator, or a thread of its own (an async client's callbacks), puts a mail; the task
runs the mails that wait after each input event (a batch, a watermark, a tick), all of
them before an operator's ``finish`` (after its processing time is quiesced, as Flink
runs "the timers and the mails" before finish), and all of them before the epoch's
snapshot, so what a mail changes is in the checkpoint. Mails never run after ``close``:
the mailbox closes then and a mail put later is refused. A mail that raises fails the
task; the error names the operator and the mail. An operator that waits for its own
mails (an async operator at capacity, or draining in ``end_input``) calls ``yield_``.
Due processing-time timers are mails as well (``processing_time.py``), queued behind
the mails already waiting.
The check after each event is one truth test of a deque."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from flintlock.core.errors import MailboxClosedError, tag_operator


@dataclass(frozen=True)
class Mail:
    """One action to run on the task's thread, and whose it is (for errors)."""

    action: Callable[[], None]
    description: str
    operator: str


class TaskMailbox:
    """One task's mails, in the order they were put; ``put`` is thread-safe."""

    def __init__(self) -> None:
        self.mails: deque[Mail] = deque()
        """Waiting mails (read by the task's loop: one truth test per event)."""
        self._arrived = threading.Condition()
        self._closed_to: dict[str, str] = {}  # operator -> why its mails are refused
        self._closed = ""

    def put(self, mail: Mail) -> None:
        """Queue ``mail``; refused once its operator finished or the mailbox closed."""
        with self._arrived:
            why = self._closed or self._closed_to.get(mail.operator)
            if why:
                raise MailboxClosedError(
                    f"operator '{mail.operator}' put the mail '{mail.description}' {why}: "
                    f"no mail runs then"
                )
            self.mails.append(mail)
            self._arrived.notify_all()

    def run_pending(self) -> None:
        """Run every mail waiting now, and those they put, in order."""
        mails = self.mails
        while mails:
            run(mails.popleft())

    def yield_(self, timeout: float | None = None) -> bool:
        """Run one mail, waiting up to ``timeout`` s (None: for ever) for one to come;
        False if none came."""
        with self._arrived:
            if not self.mails and not self._arrived.wait_for(lambda: bool(self.mails), timeout):
                return False
            mail = self.mails.popleft()
        run(mail)
        return True

    def refuse(self, operator: str, why: str) -> None:
        """From now on refuse the mails of ``operator`` (it finished)."""
        with self._arrived:
            self._closed_to[operator] = why

    def close(self) -> list[Mail]:
        """Refuse every mail from now on; the mails that never ran (a failed task's)."""
        with self._arrived:
            self._closed = "after the task's operators closed"
            dropped = list(self.mails)
            self.mails.clear()
            return dropped


def run(mail: Mail) -> None:
    """Run one mail; an error names its operator and the mail."""
    try:
        mail.action()
    except BaseException as error:
        tag_operator(error, mail.operator, f"mail '{mail.description}'")
        raise


class MailboxExecutor:
    """An operator's door to its task's mailbox (``self.mailbox`` in an operator)."""

    __slots__ = ("_mailbox", "_operator")

    def __init__(self, mailbox: TaskMailbox, operator: str) -> None:
        self._mailbox, self._operator = mailbox, operator

    def execute(self, action: Callable[[], None], description: str) -> None:
        """Run ``action`` on the task's thread, after the current input event (from any
        thread); refused after the operator's finish or close."""
        self._mailbox.put(Mail(action, description, self._operator))

    def yield_(self, timeout: float | None = None) -> bool:
        """Run the next mail of the task (any operator's), waiting for one up to
        ``timeout`` s; False if none came. For an operator that waits for its own mails."""
        return self._mailbox.yield_(timeout)

    def try_yield(self) -> bool:
        """Run the next mail if one waits; False if none did."""
        return self._mailbox.yield_(0)
