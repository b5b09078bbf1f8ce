"""Public test tools: harnesses that run the real task lifecycle in-process, a plugin
that records every lifecycle call, and the conformance kit for two-phase-commit sinks.
See CONTRIBUTING.md for walk-throughs."""

from flintlock.core.checkpoint.restore import rescale
from flintlock.core.conformance.suite import (
    SCENARIOS,
    SinkConformance,
    check_sink,
    run_scenario,
)
from flintlock.core.conformance.target import SCHEMA, OutputPlace, SinkTarget, rows
from flintlock.core.harness_output import CollectingWriter
from flintlock.core.harnesses import (
    MultipleInputHarness,
    OneInputHarness,
    SourceHarness,
    TwoInputHarness,
)
from flintlock.core.hooks.recorder import LifecycleRecorder
from flintlock.core.testing import TaskHarness

__all__ = [
    "SCENARIOS",
    "SCHEMA",
    "CollectingWriter",
    "LifecycleRecorder",
    "MultipleInputHarness",
    "OneInputHarness",
    "OutputPlace",
    "SinkConformance",
    "SinkTarget",
    "SourceHarness",
    "TaskHarness",
    "TwoInputHarness",
    "check_sink",
    "rescale",
    "rows",
    "run_scenario",
]
