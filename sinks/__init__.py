"""flintlock's sinks: two-phase-commit sinks and simple ones, over core's sink API."""
