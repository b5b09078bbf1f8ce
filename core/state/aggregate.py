"""Flink's AggregateFunction: how AggregatingState folds inputs into an accumulator.

It sits with the state, not the user functions, because its accumulator is what
AggregatingState keeps and snapshots (as Arrow, so it must be a value Arrow can store);
window ``aggregate`` folds with the same function."""

from __future__ import annotations

from typing import Generic, TypeVar

InT = TypeVar("InT")
AccT = TypeVar("AccT")
OutT = TypeVar("OutT")


class AggregateFunction(Generic[InT, AccT, OutT]):
    """Incremental aggregation: ``create_accumulator``, ``add``, ``get_result``, ``merge``.

    ``AggregateFunction[In, Acc, Out]`` (Flink's ``AggregateFunction<IN, ACC, OUT>``) types
    the values added, the accumulator and the result. The accumulator is what
    AggregatingState keeps and snapshots, so it must be a value Arrow can store (numbers,
    strings, lists, dicts of them); ``merge`` combines two accumulators (merging windows)."""

    def create_accumulator(self) -> AccT:
        """A new, empty accumulator."""
        raise NotImplementedError(f"{type(self).__name__} must override create_accumulator")

    def add(self, value: InT, accumulator: AccT) -> AccT:
        """Fold ``value`` into ``accumulator``; returns the new accumulator."""
        raise NotImplementedError(f"{type(self).__name__} must override add")

    def get_result(self, accumulator: AccT) -> OutT:
        """The aggregate's result for ``accumulator``."""
        raise NotImplementedError(f"{type(self).__name__} must override get_result")

    def merge(self, a: AccT, b: AccT) -> AccT:
        """One accumulator holding both ``a`` and ``b``."""
        raise NotImplementedError(f"{type(self).__name__} must override merge")
