"""Unbounded sources: a driver-side enumerator hands out each epoch's splits.

An unbounded job runs as epochs (ARCHITECTURE.md section 5). Before each epoch the job
master asks every unbounded source what arrived since the last one
(``UnboundedSource.plan_epoch``): the splits each subtask reads in this epoch, and the
enumerator's state after them. That state is JSON, stored in the epoch's checkpoint
metadata, so the offsets of checkpoint N are exactly where epoch N+1 starts, and a
restart re-plans a lost epoch identically from them (Flink's split enumerator, whose
state is checkpointed by the coordinator).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from flintlock.core.sources.source import Source, SourceEpoch, SourceReader

__all__ = ["EpochSplits", "SourceEpoch", "UnboundedSource"]


@dataclass(frozen=True)
class EpochSplits:
    """What an unbounded source reads in one epoch, as its enumerator planned it."""

    assignments: list[list[Any]]
    """Per subtask, the JSON splits it reads in this epoch (bounded ranges, files...)."""
    state: Any
    """The enumerator's JSON state once these splits are read: where the next epoch starts."""
    exhausted: bool = False
    """No input will ever follow these splits: the source's input ends with this epoch
    (every subtask's). True as well once every ``exhausted_subtasks`` flag is."""
    exhausted_subtasks: list[bool] | None = None
    """Per subtask, optional: no input will ever follow this subtask's splits, so it ends
    its input and finishes in this epoch while its siblings go on (FLIP-147, Flink's
    ``signalNoMoreSplits`` per reader). Once set, a subtask's flag stays set in every
    later plan, and a finished subtask is never assigned splits again."""

    def __post_init__(self) -> None:
        flags = self.exhausted_subtasks
        if flags is None:
            return
        if len(flags) != len(self.assignments):
            raise ValueError(
                f"exhausted_subtasks has {len(flags)} flags for {len(self.assignments)} "
                f"assignments: give one per subtask"
            )
        if flags and all(flags):
            object.__setattr__(self, "exhausted", True)

    def subtask_exhausted(self, subtask_index: int) -> bool:
        """True if ``subtask_index``'s input ends with this epoch (alone or with all)."""
        flags = self.exhausted_subtasks
        return self.exhausted or (flags is not None and flags[subtask_index])

    def source_epochs(self, ends: bool = False) -> list[SourceEpoch]:
        """What each subtask is told: its splits, and whether its input ends with them
        (every subtask's when ``ends``, e.g. a stop with drain)."""
        return [
            SourceEpoch(splits, ends or self.subtask_exhausted(subtask))
            for subtask, splits in enumerate(self.assignments)
        ]


class UnboundedSource(Source):
    """A source that keeps producing: read epoch by epoch from driver-planned splits.

    ``plan_epoch`` runs on the driver and must be deterministic in ``state``, so that an
    epoch planned again after a failure reads the same rows; readers run on workers and
    read exactly their splits."""

    bounded = False

    @abstractmethod
    def initial_state(self, now_ms: int) -> Any:
        """The enumerator's JSON state before the first epoch of the job."""

    @abstractmethod
    def plan_epoch(self, state: Any, now_ms: int, parallelism: int) -> EpochSplits:
        """The splits of the epoch that starts at wall time ``now_ms`` (epoch ms)."""

    @abstractmethod
    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[Any]
    ) -> SourceReader:
        """A reader of exactly ``splits`` (this subtask's part of one epoch)."""

    def notify_checkpoint_complete(self, checkpoint_id: int, state: object) -> None:
        """On the driver, once checkpoint ``checkpoint_id`` is committed, with the
        enumerator's ``state`` in it (e.g. to publish offsets for monitoring)."""

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        raise TypeError(
            f"source '{self.name}' is unbounded: it is read epoch by epoch "
            f"(create_epoch_reader), in a job run with a trigger"
        )
