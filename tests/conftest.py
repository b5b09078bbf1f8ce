"""Shared fixtures: a lifecycle recorder whose hook coverage the guard test reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hook_tally import HOOKS_SEEN, PHASES_SEEN

from flintlock.testing import LifecycleRecorder


@pytest.fixture
def make_recorder() -> Iterator[Callable[[], LifecycleRecorder]]:
    """Makes LifecycleRecorders; what they saw counts toward the hook-coverage guard."""
    made: list[LifecycleRecorder] = []

    def make() -> LifecycleRecorder:
        made.append(LifecycleRecorder())
        return made[-1]

    yield make
    for recording in made:
        HOOKS_SEEN.update(recording.hooks_seen)
        for calls in recording.by_task.values():
            PHASES_SEEN.update(call[1] for call in calls if call[0] == "task")


@pytest.fixture
def recorder(make_recorder: Callable[[], LifecycleRecorder]) -> LifecycleRecorder:
    """A fresh LifecycleRecorder whose recordings count toward the hook-coverage guard."""
    return make_recorder()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the hook-coverage guard last, after every test that records hooks."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_hook_coverage.py"))
