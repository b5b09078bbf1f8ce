"""Restart strategies: the pauses each one gives after failures, and the restart loop a
job runs under (which errors it restarts, what it records, when it gives up)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from flintlock import GraphError, RestartStrategy, StreamExecutionEnvironment
from flintlock.core.api.restart_strategies import RestartBackoff
from flintlock.core.datastream.restarts import execute_with_restarts
from flintlock.core.job.result import JobExecutionResult
from flintlock.errors import CommitError, JobLeaseError


def pauses(strategy: RestartStrategy, failures: list[tuple[int, int]]) -> list[int | None]:
    """The pause after each (time ms, run lasted ms) failure, in order."""
    backoff = RestartBackoff(strategy, random.Random(7))
    return [backoff.after_failure(now, lasted) for now, lasted in failures]


def test_fixed_delay_restarts_so_many_times() -> None:
    assert pauses(RestartStrategy.fixed_delay(2, 500), [(0, 9)] * 3) == [500, 500, None]
    assert pauses(RestartStrategy.none(), [(0, 9)]) == [None]


def test_exponential_delay_grows_to_its_cap_with_jitter_and_starts_over_after_a_long_run() -> None:
    plain = RestartStrategy.exponential_delay(100, 1000, jitter=0.0, reset_after_ms=60_000)
    assert pauses(plain, [(0, 10)] * 6) == [100, 200, 400, 800, 1000, 1000]
    assert pauses(plain, [(0, 10), (0, 10), (0, 60_000)]) == [100, 200, 100]  # reset
    jittered = pauses(RestartStrategy.exponential_delay(1000, 8000, jitter=0.1), [(0, 1)] * 3)
    for pause, base in zip(jittered, [1000, 2000, 4000], strict=True):
        assert pause is not None and base * 0.9 <= pause <= base * 1.1
    assert len(set(jittered)) == 3
    limited = RestartStrategy.exponential_delay(10, 100, jitter=0.0, attempts=2)
    assert pauses(limited, [(0, 1)] * 3) == [10, 20, None]


def test_failure_rate_gives_up_on_too_many_failures_in_the_interval() -> None:
    rate = RestartStrategy.failure_rate(2, interval_ms=1000, delay_ms=50)
    assert pauses(rate, [(0, 1), (500, 1), (900, 1)]) == [50, 50, None]
    assert pauses(rate, [(0, 1), (500, 1), (1200, 1), (1600, 1)]) == [50, 50, 50, 50]


def test_bad_strategies_are_refused() -> None:
    with pytest.raises(ValueError, match="multiplier >= 1"):
        RestartStrategy.exponential_delay(100, 1000, multiplier=0.5)
    with pytest.raises(GraphError, match="restart_strategy must be a RestartStrategy"):
        StreamExecutionEnvironment(parallelism=1, restart_strategy="fixed")  # type: ignore[arg-type]


def result() -> JobExecutionResult:
    return JobExecutionResult("job", "run", 3, 1.0, metrics={"epochs": []})


def test_a_failed_run_restarts_until_one_succeeds_and_the_result_counts_them() -> None:
    failures: list[Exception] = [CommitError("the database went away"), OSError("gone too")]
    firsts: list[bool] = []
    slept: list[float] = []

    def run(first: bool) -> JobExecutionResult:
        firsts.append(first)
        if failures:
            raise failures.pop(0)
        return result()

    done = execute_with_restarts(run, RestartStrategy.fixed_delay(3, 250), "job", slept.append)
    assert firsts == [True, False, False]
    assert slept == [0.25, 0.25]
    assert done.restarts == 2 and done.metrics["numRestarts"] == 2
    assert done.restart_causes == ["CommitError: the database went away", "OSError: gone too"]


def test_the_strategy_gives_up_naming_the_restarts_and_some_errors_end_the_job_at_once() -> None:
    def always(first: bool) -> Any:
        raise CommitError("still down")

    with pytest.raises(CommitError) as failed:
        execute_with_restarts(always, RestartStrategy.fixed_delay(2, 0), "orders", lambda s: None)
    assert "gave up after 2 restart(s) under its restart strategy fixed-delay" in str(
        failed.value.__notes__
    )
    for error in (GraphError("bad program"), JobLeaseError("another driver holds it")):
        calls: list[bool] = []

        def fails(first: bool, error: Exception = error, calls: list[bool] = calls) -> Any:
            calls.append(first)
            raise error

        with pytest.raises(type(error)):
            execute_with_restarts(fails, RestartStrategy.fixed_delay(5, 0), "orders", print)
        assert calls == [True]  # not restarted


def test_flintlock_run_passes_its_restart_strategy_to_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert RestartStrategy.parse("fixed-delay:3:1000") == RestartStrategy.fixed_delay(3, 1000)
    assert RestartStrategy.parse("failure-rate:2:60000:500").interval_ms == 60_000
    assert RestartStrategy.parse("exponential-delay:100:5000").max_delay_ms == 5000
    monkeypatch.setenv("FLINTLOCK_RESTART_STRATEGY", "exponential-delay:100:5000")
    env = StreamExecutionEnvironment(parallelism=1)
    assert env.restart_strategy == RestartStrategy.exponential_delay(100, 5000)
    monkeypatch.setenv("FLINTLOCK_RESTART_STRATEGY", "sometimes")
    with pytest.raises(
        GraphError, match="FLINTLOCK_RESTART_STRATEGY: restart strategy 'sometimes'"
    ):
        StreamExecutionEnvironment(parallelism=1)
