"""Shared fixtures: a lifecycle recorder whose hook coverage the guard test reads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flintlock.testing import LifecycleRecorder

HOOKS_SEEN: set[str] = set()
"""Every hook a recorder saw in this session (read by tests/test_hook_coverage.py)."""


@pytest.fixture
def recorder() -> Iterator[LifecycleRecorder]:
    """A fresh LifecycleRecorder; what it saw counts toward the hook-coverage guard."""
    recording = LifecycleRecorder()
    yield recording
    HOOKS_SEEN.update(recording.hooks_seen)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the hook-coverage guard last, after every test that records hooks."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_hook_coverage.py"))
