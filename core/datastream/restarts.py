"""Runs a job under its restart strategy: a failed run starts again, after the strategy's
pause, from the job's latest completed checkpoint, as a new run of the same job (a
start as ``flintlock run`` again would make: exactly once rests on the same recovery).

Errors a restart cannot cure end the job at once: a program, plugin or restore that is
wrong, a cancel, a lost lease. Each restart is logged with its cause; the result counts
them (``restarts``, and ``numRestarts`` in its metrics)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from flintlock.core.api.restart_strategies import RestartBackoff, RestartStrategy
from flintlock.core.errors import (
    GraphError,
    JobCanceled,
    JobControlError,
    JobIdentityError,
    JobLeaseError,
    PluginError,
    RestoreError,
    SparkSetupError,
    StateSchemaError,
)
from flintlock.core.job.result import JobExecutionResult

LOG = logging.getLogger("flintlock.restarts")
NOT_CURED_BY_A_RESTART = (
    GraphError,
    PluginError,
    RestoreError,
    StateSchemaError,
    SparkSetupError,
    JobIdentityError,
    JobCanceled,
    JobLeaseError,
    JobControlError,
)


def execute_with_restarts(
    run: Callable[[bool], JobExecutionResult],
    strategy: RestartStrategy,
    job_name: str,
    sleep: Callable[[float], None] = time.sleep,
) -> JobExecutionResult:
    """``run(first)`` until it returns, restarting as ``strategy`` allows; the last
    failure, with how many restarts came before it, when the strategy gives up."""
    backoff = RestartBackoff(strategy)
    causes: list[str] = []
    while True:
        started = time.monotonic()
        try:
            result = run(not causes)
        except Exception as error:
            if isinstance(error, NOT_CURED_BY_A_RESTART):
                raise
            lasted_ms = int((time.monotonic() - started) * 1000)
            delay = backoff.after_failure(time.time_ns() // 1_000_000, lasted_ms)
            if delay is None:
                if causes and hasattr(error, "add_note"):
                    error.add_note(
                        f"job '{job_name}' gave up after {len(causes)} restart(s) under its "
                        f"restart strategy {strategy.describe()}"
                    )
                raise
            cause = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            causes.append(cause)
            LOG.warning(
                "job '%s' failed (%s); restart %d in %d ms (%s)",
                job_name,
                cause,
                len(causes),
                delay,
                strategy.describe(),
            )
            sleep(delay / 1000)
            continue
        result.restarts, result.restart_causes = len(causes), causes
        if result.metrics:
            result.metrics["numRestarts"] = len(causes)
        return result
