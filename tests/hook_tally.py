"""What the session's lifecycle recorders saw (read by tests/test_hook_coverage.py)."""

from __future__ import annotations

HOOKS_SEEN: set[str] = set()
"""Every hook a recorder saw in this session."""
PHASES_SEEN: set[str] = set()
"""Every task invoke phase a recorder saw in this session."""
