"""Placeholder: filled by its issue-21 branch."""
