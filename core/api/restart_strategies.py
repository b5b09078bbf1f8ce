"""Restart strategies (Flink's ``restart-strategy``): whether, and after how long, a job
whose run failed starts again by itself from its latest completed checkpoint.

``none`` (the default), ``fixed_delay``, ``exponential_delay`` (with jitter, and a reset
after a quiet time) and ``failure_rate`` (at most N failures in an interval). A
``RestartStrategy`` is a plain description; a ``RestartBackoff`` follows one job's
failures and answers each with the pause before the next start, or None: give up."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Literal

RESTART_STRATEGY_ENV = "FLINTLOCK_RESTART_STRATEGY"
"""Set by ``flintlock run --restart-strategy``: the environment's default strategy."""
Kind = Literal["none", "fixed-delay", "exponential-delay", "failure-rate"]


@dataclass(frozen=True)
class RestartStrategy:
    """How a failed job restarts; build one with the class methods."""

    kind: Kind = "none"
    attempts: int = 0
    """Restarts allowed (fixed delay; exponential delay: 0 is no limit)."""
    delay_ms: int = 0
    """The pause before a restart (exponential delay: the first one)."""
    max_delay_ms: int = 0
    multiplier: float = 1.0
    jitter: float = 0.0
    """Exponential delay: each pause varies by up to this fraction, up or down."""
    reset_after_ms: int = 0
    """Exponential delay: a run that lasted this long starts the pauses over."""
    interval_ms: int = 0
    """Failure rate: the window in which at most ``attempts`` failures are restarted."""

    def __post_init__(self) -> None:
        numbers = (self.attempts, self.delay_ms, self.max_delay_ms, self.interval_ms)
        if min(numbers) < 0 or self.multiplier < 1 or not 0 <= self.jitter < 1:
            raise ValueError(
                f"RestartStrategy {self.kind}: attempts, delays and interval >= 0, "
                f"multiplier >= 1 and 0 <= jitter < 1; got {self}"
            )

    @classmethod
    def none(cls) -> RestartStrategy:
        """A failed run fails the job (the default)."""
        return cls()

    @classmethod
    def fixed_delay(cls, attempts: int, delay_ms: int) -> RestartStrategy:
        """Up to ``attempts`` restarts, ``delay_ms`` after each failure."""
        return cls("fixed-delay", attempts, delay_ms)

    @classmethod
    def exponential_delay(
        cls,
        initial_delay_ms: int,
        max_delay_ms: int,
        multiplier: float = 2.0,
        jitter: float = 0.1,
        reset_after_ms: int = 60_000,
        attempts: int = 0,
    ) -> RestartStrategy:
        """Pauses that grow by ``multiplier`` up to ``max_delay_ms``, each varied by
        ``jitter``; they start over once a run lasted ``reset_after_ms``; at most
        ``attempts`` restarts in a row (0: no limit)."""
        return cls(
            "exponential-delay",
            attempts,
            initial_delay_ms,
            max_delay_ms,
            multiplier,
            jitter,
            reset_after_ms,
        )

    @classmethod
    def failure_rate(cls, max_failures: int, interval_ms: int, delay_ms: int) -> RestartStrategy:
        """Restart after ``delay_ms`` unless more than ``max_failures`` failures fell
        within the last ``interval_ms``."""
        return cls("failure-rate", max_failures, delay_ms, interval_ms=interval_ms)

    @classmethod
    def parse(cls, spec: str) -> RestartStrategy:
        """From ``flintlock run --restart-strategy``: ``none``, ``fixed-delay:ATTEMPTS:MS``,
        ``exponential-delay:INITIAL_MS:MAX_MS`` or ``failure-rate:FAILURES:INTERVAL_MS:MS``."""
        kind, *numbers = spec.strip().split(":")
        arity = {"none": 0, "fixed-delay": 2, "exponential-delay": 2, "failure-rate": 3}
        if (
            kind not in arity
            or len(numbers) != arity[kind]
            or not all(n.isdigit() for n in numbers)
        ):
            raise ValueError(
                f"restart strategy {spec!r}: say none, fixed-delay:ATTEMPTS:MS, "
                f"exponential-delay:INITIAL_MS:MAX_MS or failure-rate:FAILURES:INTERVAL_MS:MS"
            )
        values = [int(n) for n in numbers]
        if kind == "fixed-delay":
            return cls.fixed_delay(*values)
        if kind == "exponential-delay":
            return cls.exponential_delay(*values)
        if kind == "failure-rate":
            return cls.failure_rate(*values)
        return cls.none()

    def describe(self) -> str:
        """E.g. ``fixed-delay (3 attempts, 1000 ms)``, for errors and the run log."""
        if self.kind == "none":
            return "none"
        if self.kind == "fixed-delay":
            return f"fixed-delay ({self.attempts} attempts, {self.delay_ms} ms)"
        if self.kind == "failure-rate":
            return (
                f"failure-rate ({self.attempts} failures in {self.interval_ms} ms, "
                f"{self.delay_ms} ms)"
            )
        limit = f"{self.attempts} attempts, " if self.attempts else ""
        return (
            f"exponential-delay ({limit}{self.delay_ms}..{self.max_delay_ms} ms, "
            f"x{self.multiplier})"
        )


class RestartBackoff:
    """One job's restarts under a strategy: ``after_failure`` gives the next pause."""

    def __init__(self, strategy: RestartStrategy, rng: random.Random | None = None) -> None:
        self.strategy = strategy
        self.restarts = 0
        self._in_a_row = 0
        self._failures: deque[int] = deque()
        self._rng = rng or random.Random()

    def after_failure(self, now_ms: int, run_lasted_ms: int) -> int | None:
        """The pause (ms) before restarting after a failure at ``now_ms`` of a run that
        lasted ``run_lasted_ms``; None when the strategy gives up."""
        strategy = self.strategy
        if strategy.kind == "none":
            return None
        if strategy.kind == "fixed-delay":
            delay: int | None = strategy.delay_ms if self.restarts < strategy.attempts else None
        elif strategy.kind == "failure-rate":
            self._failures.append(now_ms)
            while self._failures and self._failures[0] <= now_ms - strategy.interval_ms:
                self._failures.popleft()
            delay = strategy.delay_ms if len(self._failures) <= strategy.attempts else None
        else:
            delay = self._exponential(run_lasted_ms)
        if delay is not None:
            self.restarts += 1
        return delay

    def _exponential(self, run_lasted_ms: int) -> int | None:
        strategy = self.strategy
        if strategy.reset_after_ms and run_lasted_ms >= strategy.reset_after_ms:
            self._in_a_row = 0
        if strategy.attempts and self._in_a_row >= strategy.attempts:
            return None
        base = strategy.delay_ms * strategy.multiplier**self._in_a_row
        self._in_a_row += 1
        capped = min(base, strategy.max_delay_ms or base)
        varied = capped * (1 + self._rng.uniform(-strategy.jitter, strategy.jitter))
        return int(max(0, varied))
