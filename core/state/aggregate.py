"""Flink's AggregateFunction: how AggregatingState folds inputs into an accumulator."""

from __future__ import annotations

from typing import Any


class AggregateFunction:
    """Incremental aggregation: ``create_accumulator``, ``add``, ``get_result``, ``merge``.

    The accumulator is what AggregatingState keeps and snapshots, so it must be a value
    Arrow can store (numbers, strings, lists, dicts of them); ``merge`` combines two
    accumulators (merging windows)."""

    def create_accumulator(self) -> Any:
        """A new, empty accumulator."""
        raise NotImplementedError(f"{type(self).__name__} must override create_accumulator")

    def add(self, value: Any, accumulator: Any) -> Any:
        """Fold ``value`` into ``accumulator``; returns the new accumulator."""
        raise NotImplementedError(f"{type(self).__name__} must override add")

    def get_result(self, accumulator: Any) -> Any:
        """The aggregate's result for ``accumulator``."""
        raise NotImplementedError(f"{type(self).__name__} must override get_result")

    def merge(self, a: Any, b: Any) -> Any:
        """One accumulator holding both ``a`` and ``b``."""
        raise NotImplementedError(f"{type(self).__name__} must override merge")
