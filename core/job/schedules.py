"""When a run's epochs run: the ``Schedule`` protocol and the triggered schedule (one
epoch for bounded sources, epochs as the trigger says for unbounded ones).

A schedule answers only what the next epoch is: the unbounded sources' splits, whose
input ends with it, and the request (savepoint or stop) its checkpoint answers; the run
(``JobRun.run_epochs``) runs, checkpoints and commits it. ``micro_batches`` is the other
schedule: a streaming DataFrame's micro-batches.

Bounded sources (collections, DataFrames, tables) read their whole input in the first
epoch and finish there (FLIP-147: a finished subtask is not run again), so a job may mix
them with unbounded ones; its input ends when the unbounded sources' does. A job without
unbounded sources runs one epoch, its final checkpoint, and takes no requests (its final
checkpoint answers a stop sent meanwhile).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from flintlock.core.checkpoint.finished_subtasks import epoch_has_work, finished_subtasks
from flintlock.core.errors import GraphError
from flintlock.core.job.control import ControlRequest
from flintlock.core.sources.epochs import EpochSplits
from flintlock.core.spark.keep_alive import HOLD_SECONDS, keep_alive_seconds, keep_workers_alive

if TYPE_CHECKING:
    from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
    from flintlock.core.checkpoint.snapshots import TaskRestore
    from flintlock.core.job.run import JobRun


@dataclass
class Position:
    """Where a run stands between two epochs: what the next one continues from."""

    checkpoint: CompletedCheckpoint | None
    """The last completed checkpoint (the job's latest at the start; None: none)."""
    checkpoint_id: int
    """The next epoch's checkpoint id (a schedule may fix its own)."""
    source_states: dict[str, Any]
    """The unbounded sources' states by uid (their enumerators' positions)."""
    restores: dict[tuple[int, int], TaskRestore]
    """What the next epoch's subtasks restore."""
    finished: dict[str, int]
    """Fully finished vertices (vertex name -> the checkpoint they finished in)."""
    aborted: list[int] = field(default_factory=list)
    """Savepoints that failed since the last checkpoint (the tasks hear of them)."""


@dataclass(frozen=True)
class Epoch:
    """What a schedule says of the epoch to run now."""

    checkpoint_id: int
    planned: dict[str, EpochSplits]
    """The unbounded sources' splits, by uid."""
    source_ends: dict[str, bool]
    """Whether each unbounded source's input ends with this epoch, by uid."""
    request: ControlRequest | None = None
    """The savepoint or stop request whose savepoint this epoch's checkpoint is."""

    @property
    def input_ends(self) -> bool:
        """The job's input ends: its final checkpoint (every source ended)."""
        return all(self.source_ends.values())


class Schedule(Protocol):
    """When a run's epochs run, and what each reads."""

    takes_requests: bool
    """False: savepoint and stop requests wait for the run's end (a bounded job)."""

    commits_beside_next_epoch: bool
    """True: the next epoch may run while a checkpoint's commit does (``epoch_done``
    comes later); False: each epoch waits for the commit before it."""

    def start(self, position: Position) -> None:
        """The run starts at ``position``."""

    def next_epoch(self, position: Position) -> Epoch | None:
        """The epoch to run now (waiting for it as the schedule says), or None: the run
        stops here (its input has nothing more for now, or its trigger ran out)."""

    def savepoint_failed(self, epoch: Epoch, position: Position) -> None:
        """``epoch``'s savepoint failed before it completed (the job goes on)."""

    def epoch_done(self, epoch: Epoch) -> None:
        """``epoch`` is committed."""

    def close(self) -> None:
        """The run ended (whatever way)."""


class TriggeredEpochs:
    """Epochs as the run's trigger says until the input ends; one epoch for a run
    without unbounded sources."""

    def __init__(self, run: JobRun) -> None:
        self.run = run
        self.trigger = run.trigger
        self.takes_requests = bool(run.sources)
        self.commits_beside_next_epoch = True
        self.epochs = 0
        self.last_start = time.monotonic()

    def start(self, position: Position) -> None:
        self.last_start = time.monotonic()

    def next_epoch(self, position: Position) -> Epoch | None:
        """Plan the sources' splits; skip an empty epoch when epochs run back to back,
        stop an available-now run once its sources have nothing more, and run one epoch
        for a once trigger."""
        run = self.run
        if self.epochs and self.trigger.kind == "once":
            return None
        if self.epochs:
            self._wait(self.trigger.interval_seconds)
        while True:
            request = run.next_request() if self.takes_requests else None
            planned = self._plan_sources(position.source_states)
            drain = request is not None and request.action == "stop" and request.drain
            source_ends = {uid: drain or p.exhausted for uid, p in planned.items()}
            epoch = Epoch(position.checkpoint_id, planned, source_ends, request)
            if request is not None or epoch.input_ends or self._has_work(epoch, position):
                self.epochs += 1
                return epoch
            if self.trigger.kind == "available_now" and run.epochs_checkpointed:
                return None  # nothing more right now
            if self.trigger.kind != "processing_time" or self.trigger.interval_seconds:
                self.epochs += 1
                return epoch  # a triggered epoch runs even if empty
            self._wait(0.05)  # back to back: an empty epoch is not run

    def savepoint_failed(self, epoch: Epoch, position: Position) -> None:
        """The job goes on from its last checkpoint under a new id; the tasks of the next
        epoch hear of the aborted one."""
        position.aborted.append(epoch.checkpoint_id)
        position.checkpoint_id = epoch.checkpoint_id + 1

    def epoch_done(self, epoch: Epoch) -> None:
        pass

    def close(self) -> None:
        pass

    def _has_work(self, epoch: Epoch, position: Position) -> bool:
        """Rows to read, a source subtask whose input ends now (it finishes in an epoch
        of its own), or a bounded source not yet read to its end."""
        run = self.run
        finished, restores = position.finished, position.restores
        ends = epoch.source_ends
        if epoch_has_work(run.graph, run.uids, epoch.planned, ends, finished, restores):
            return True
        done = finished_subtasks(run.graph, restores)
        return any(
            vertex.name not in finished and len(done.get(vertex.name, {})) < vertex.parallelism
            for vertex in run.graph.vertices.values()
            if any(t.name in run.bounded_sources for t in vertex.all_transformations)
        )

    def _plan_sources(self, states: dict[str, Any]) -> dict[str, EpochSplits]:
        """Each unbounded source's splits for the epoch starting now (by uid)."""
        now_ms = int(time.time() * 1000)
        planned = {}
        for name, (source, parallelism) in self.run.sources.items():
            uid = self.run.uids[name]
            state = states[uid] if uid in states else source.initial_state(now_ms)
            splits = source.plan_epoch(state, now_ms, parallelism)
            if len(splits.assignments) != parallelism:
                raise GraphError(
                    f"source '{name}' planned {len(splits.assignments)} assignments for "
                    f"{parallelism} subtasks"
                )
            planned[uid] = splits
        return planned

    def _wait(self, seconds: float) -> None:
        """Sleep until ``seconds`` after the last epoch started (a request starts the
        next one at once); a long wait touches the Python workers before Spark stops
        them as idle."""
        due = self.last_start + seconds
        period, touched = keep_alive_seconds(), time.monotonic()
        while time.monotonic() < due and self.run.next_request() is None:
            now = time.monotonic()
            if period and now - touched >= period and due - now > 2 * HOLD_SECONDS:
                keep_workers_alive(self.run.spark, self.run.config.job_name)
                touched = time.monotonic()
            time.sleep(min(0.05, max(0.0, due - time.monotonic())))
        self.last_start = time.monotonic()
