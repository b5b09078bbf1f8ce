"""Public test tools: harnesses that run the real task lifecycle in-process, and a
plugin that records every lifecycle call. See CONTRIBUTING.md for walk-throughs."""

from flintlock.core.checkpoint.restore import rescale
from flintlock.core.harness_output import CollectingWriter
from flintlock.core.hooks.recorder import LifecycleRecorder
from flintlock.core.testing import (
    OneInputHarness,
    SourceHarness,
    TaskHarness,
    TwoInputHarness,
)

__all__ = [
    "CollectingWriter",
    "LifecycleRecorder",
    "OneInputHarness",
    "SourceHarness",
    "TaskHarness",
    "TwoInputHarness",
    "rescale",
]
