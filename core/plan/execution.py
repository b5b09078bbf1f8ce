"""What every Spark task of one epoch is told: vertices, stages, routes, the barrier.

Built on the driver, shipped in each stage's closure (cloudpickle), read on workers.

It holds the job's functions and user source splits, so it is cloudpickled as PySpark
pickles a stage's function, and never stored. It splits into the run's layout and the
epoch's part, because a run's stages are built once and only the epoch's part changes
between epochs (``core/spark/epoch_frames.py``)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, replace
from typing import Any

import cloudpickle

from flintlock.core.checkpoint.snapshots import TaskRestore
from flintlock.core.errors import FlintlockError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.exchange.messages import ACK_VERTEX
from flintlock.core.plan.graph import JobGraph, JobVertex
from flintlock.core.sources.source import SourceEpoch
from flintlock.core.storage.options import NO_OPTIONS, StorageOptions


@dataclass
class ExecutionPlan:
    """One epoch of one job run, laid out as stages of Spark partitions."""

    job_name: str
    run_id: str
    epoch: int
    barrier: CheckpointBarrier
    checkpoint_uri: str
    max_parallelism: int
    state_backend: str
    graph: JobGraph
    plugins: list[Any] = field(default_factory=list)
    job_id: str = ""
    restores: dict[tuple[int, int], TaskRestore] = field(default_factory=dict)
    """(vertex, subtask) -> what it restores from; absent for a fresh start."""
    source_epochs: dict[str, list[SourceEpoch]] = field(default_factory=dict)
    """Unbounded source operator name -> per subtask, its splits of this epoch."""
    storage_options: StorageOptions = NO_OPTIONS
    """The environment's object-store settings: tasks open checkpoint storage with them."""
    snapshot_root: str | None = None
    """Where every task writes this epoch's snapshot (a savepoint's folder); None: the run's."""
    finished_vertices: dict[str, int] = field(default_factory=dict)
    """Fully finished vertex name -> the checkpoint it finished in: its subtasks run no
    operator, they only forward the end of their output and acknowledge (FLIP-147)."""
    finished_subtasks: dict[str, dict[int, int]] = field(default_factory=dict)
    """Vertex name -> {subtask: the checkpoint it finished in}: finished subtasks of
    vertices whose other subtasks still run; they run no operator either."""
    metrics: bool = True
    """Tasks take their metrics at each snapshot (``env.execute(metrics=False)``: not)."""

    def __post_init__(self) -> None:
        layers = self.graph.layers()
        self.offsets: dict[int, int] = {}
        self.stage_widths: list[int] = []
        for vertices in layers:
            start = 0
            for vertex in vertices:
                self.offsets[vertex.id] = start
                start += vertex.parallelism
            self.stage_widths.append(start)
        self.stage_widths.append(1)  # the driver, which collects the last stage
        self.ack_stage = len(layers)

    def epoch_part(self) -> dict[str, Any]:
        """What differs between the epochs of one run (the rest is its layout)."""
        return {name: getattr(self, name) for name in EPOCH_FIELDS}

    def encoded_epoch_part(self) -> str:
        """The per-epoch part as text for a Spark local property (it holds user source
        splits, so cloudpickle, as the stage's closure does; it is never stored)."""
        return base64.b64encode(cloudpickle.dumps(self.epoch_part())).decode("ascii")

    def layout_only(self) -> ExecutionPlan:
        """This plan without its epoch part: what every epoch of the run shares."""
        return replace(self, **{name: EMPTY_EPOCH_PART[name] for name in EPOCH_FIELDS})

    def for_epoch(self, encoded: str | None) -> ExecutionPlan:
        """In a task: this run's template plan with the epoch's encoded part applied."""
        if encoded is None:
            raise FlintlockError(
                f"job {self.job_name!r}: a task of a reused epoch stage found no "
                f"{EPOCH_PROPERTY!r} local property (a stage run outside JobMaster.run_epoch)"
            )
        return self.with_epoch_part(cloudpickle.loads(base64.b64decode(encoded)))

    def with_epoch_part(self, part: dict[str, Any]) -> ExecutionPlan:
        """This run's plan for the epoch whose ``epoch_part`` is ``part``."""
        return replace(self, **part)

    def same_layout(self, other: ExecutionPlan) -> bool:
        """Whether both plans run the same stages (the same run, graph and settings), so
        one epoch's stages serve the other with its epoch part."""
        mine = {k: v for k, v in vars(self).items() if k not in EPOCH_FIELDS}
        theirs = {k: v for k, v in vars(other).items() if k not in EPOCH_FIELDS}
        return (
            self.graph is other.graph
            and self.plugins is other.plugins
            and {k: v for k, v in mine.items() if k not in ("graph", "plugins")}
            == {k: v for k, v in theirs.items() if k not in ("graph", "plugins")}
        )

    def finished_at(self, vertex_name: str, subtask: int) -> int | None:
        """The checkpoint a finished subtask finished in; None if it runs this epoch."""
        at = self.finished_vertices.get(vertex_name)
        return at if at is not None else self.finished_subtasks.get(vertex_name, {}).get(subtask)

    @property
    def vertices(self) -> dict[int, JobVertex]:
        """Vertices by id."""
        return self.graph.vertices

    def stage_of(self, vertex_id: int) -> int:
        """The stage a vertex (or the acknowledgement pseudo-vertex) runs in."""
        return self.ack_stage if vertex_id == ACK_VERTEX else self.vertices[vertex_id].layer

    def locate(self, stage: int, partition: int) -> tuple[JobVertex, int]:
        """The vertex and subtask that partition ``partition`` of ``stage`` runs."""
        for vertex in self.graph.layers()[stage]:
            offset = self.offsets[vertex.id]
            if offset <= partition < offset + vertex.parallelism:
                return vertex, partition - offset
        raise ValueError(f"stage {stage} has no partition {partition}")

    def route(self, from_stage: int, dest_vertex: int, dest_subtask: int, channel_key: int) -> int:
        """The partition of stage ``from_stage + 1`` a message must go to.

        The destination's own partition if it runs there; else a relay partition fixed by
        the channel, so every message of a channel takes the same path and stays in order.
        """
        if self.stage_of(dest_vertex) == from_stage + 1:
            return 0 if dest_vertex == ACK_VERTEX else self.offsets[dest_vertex] + dest_subtask
        return channel_key % self.stage_widths[from_stage + 1]

    def ack_hop(self, vertex_id: int, subtask: int) -> tuple[int, int]:
        """Where a subtask sends acknowledgements: one downstream subtask, or the final stage."""
        outputs = self.vertices[vertex_id].outputs
        if not outputs:
            return ACK_VERTEX, 0
        target = self.vertices[outputs[0].target]
        return target.id, subtask % target.parallelism

    def expected_subtasks(self) -> set[tuple[str, int]]:
        """Every (vertex name, subtask) that must acknowledge the epoch."""
        return {(v.name, s) for v in self.vertices.values() for s in range(v.parallelism)}


EPOCH_PROPERTY = "flintlock.epoch.plan"
"""The Spark local property that carries an epoch's part of the plan to its tasks."""

EPOCH_FIELDS = (
    "epoch",
    "barrier",
    "restores",
    "source_epochs",
    "snapshot_root",
    "finished_vertices",
    "finished_subtasks",
)
"""The fields of ``ExecutionPlan`` that change from one epoch of a run to the next."""


EMPTY_EPOCH_PART: dict[str, Any] = {
    "epoch": 0,
    "barrier": CheckpointBarrier(0, "checkpoint", True),
    "restores": {},
    "source_epochs": {},
    "snapshot_root": None,
    "finished_vertices": {},
    "finished_subtasks": {},
}
"""What ``layout_only`` leaves of the epoch part: each task gets the epoch's own."""


def channel_key(src_vertex: int, src_subtask: int, dest_vertex: int, dest_subtask: int) -> int:
    """A stable number for a channel, to pick its relay partition."""
    return abs(((src_vertex * 1_000_003 + src_subtask) * 8191 + dest_vertex) * 131 + dest_subtask)
