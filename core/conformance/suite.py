"""Running the kit: every scenario by name, one at a time or all, and a base class that
gives a pytest test class one test per scenario."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic

from flintlock.core.conformance import scenarios
from flintlock.core.conformance.chaos import fail_every_n_records
from flintlock.core.conformance.scenario import Scenario
from flintlock.core.conformance.target import SinkT, SinkTarget
from flintlock.core.errors import SinkConformanceError

ScenarioFunction = Callable[[Scenario], None]

SCENARIOS: dict[str, ScenarioFunction] = {
    function.__name__: function
    for function in (
        scenarios.empty_checkpoints,
        scenarios.ordered_completion,
        scenarios.out_of_order_completion,
        scenarios.subsumed_checkpoints,
        scenarios.lost_notice_then_restart,
        scenarios.commit_twice,
        scenarios.two_sinks_one_notified,
        scenarios.another_job_same_output,
        scenarios.bounded_final_checkpoint,
        scenarios.stop_with_drain,
        scenarios.stop_without_drain,
        scenarios.abort_after_pre_commit,
        scenarios.restart_at_another_parallelism,
        fail_every_n_records,
    )
}
"""Every scenario of the kit by name, in the order ``check_sink`` runs them."""


def run_scenario(target: SinkTarget[SinkT], scenario: str, folder: str | os.PathLike[str]) -> None:
    """Run one scenario on ``target`` (its jobs' checkpoints and places' folders go in
    ``folder``); a SinkConformanceError names the scenario and what was wrong."""
    run = Scenario(target, scenario, os.fspath(folder))
    try:
        SCENARIOS[scenario](run)
        run.finish()
    except SinkConformanceError:
        raise
    except Exception as error:  # the sink raised where the runtime expects none
        run.fail(f"{type(error).__name__}: {error}", error)


def check_sink(target: SinkTarget[SinkT], folder: str | os.PathLike[str]) -> None:
    """Run every scenario on ``target``, each in a folder of its own under ``folder``."""
    for name in SCENARIOS:
        path = os.path.join(os.fspath(folder), name)
        os.makedirs(path, exist_ok=True)
        run_scenario(target, name, path)


class SinkConformance(Generic[SinkT]):
    """Subclass it as a pytest class (``class TestMySink(SinkConformance[MySink])``) and
    define ``sink_target``: pytest then runs one test per scenario, named after it."""

    def sink_target(self) -> SinkTarget[SinkT]:
        """The adapter for the sink under test."""
        raise NotImplementedError("define sink_target() in the SinkConformance subclass")


def _scenario_test(name: str) -> Callable[[SinkConformance[Any], Path], None]:
    def test(self: SinkConformance[Any], tmp_path: Path) -> None:
        run_scenario(self.sink_target(), name, tmp_path)

    test.__name__ = test.__qualname__ = f"test_{name}"
    test.__doc__ = SCENARIOS[name].__doc__
    return test


for _name in SCENARIOS:
    setattr(SinkConformance, f"test_{_name}", _scenario_test(_name))
