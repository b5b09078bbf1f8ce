"""The logical graph a DataStream program builds, and its chaining into vertices.

Transformations are nodes; an edge carries a partitioner. Forward edges between
transformations of equal parallelism, where the upstream has exactly one consumer and the
downstream exactly one input, are chained into one vertex (one task). Vertices are
layered: a vertex runs in the stage after the deepest of its inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from flintlock.core.errors import GraphError
from flintlock.core.exchange.partitioners import FORWARD, REBALANCE, Partitioner
from flintlock.core.runtime.operator import StreamOperator, TwoInputStreamOperator


@dataclass
class InputEdge:
    """An upstream transformation feeding input ``input_index`` through ``partitioner``."""

    source_id: int
    input_index: int
    partitioner: Partitioner | None = None
    """None: forward where parallelism matches, else rebalance (decided at build time)."""
    side_output: str | None = None
    """The OutputTag name when this edge reads the upstream's side output (never chained)."""


@dataclass
class Transformation:
    """One operator of the program, with how to build it and where its input comes from."""

    id: int
    name: str
    make_operator: Callable[[], StreamOperator]
    parallelism: int
    inputs: list[InputEdge] = field(default_factory=list)
    is_source: bool = False
    spark_source: Any = None
    """For sources that read a Spark DataFrame: the DataFrame (its partitions are subtasks)."""
    parallelism_from_partitions: bool = False
    """A DataFrame source read in place: its subtasks are the frame's partitions, counted
    when the job starts (``parallelism`` is then only the fallback where they cannot be)."""
    sink: Any = None
    """For 2PC sinks: the sink, whose driver-side copy commits."""
    is_sink: bool = False
    uid: str | None = None
    """A stable id for this operator's state in checkpoints (``DataStream.uid``); the
    name when None. A restore matches operators by it."""
    task_type: str | None = None
    """A registered task type chosen with ``set_task_type``; it heads its own vertex."""
    follows_input: bool = False
    """Runs at its one input's parallelism, whatever that is when the job starts (a
    DataFrame source's partition count), so it chains to it; left out of the graph where
    it could not chain (its input feeds others too), as a window pre-aggregation may be."""

    def __getstate__(self) -> dict[str, Any]:
        """Ship to workers without the DataFrame (it lives on the driver)."""
        state = dict(self.__dict__)
        state["spark_source"] = None
        return state


@dataclass
class OutputEdge:
    """A vertex's output into input ``input_index`` of ``target``."""

    target: int
    input_index: int
    partitioner: Partitioner
    side: tuple[str, str] | None = None
    """(operator name, tag name) for a side output's edge; None for the main output."""


@dataclass
class JobVertex:
    """A chain of transformations that runs as one task per subtask."""

    id: int
    transformations: list[Transformation]
    parallelism: int
    task_type: str
    inputs: list[tuple[int, int, Partitioner]] = field(default_factory=list)
    """(upstream vertex, input index, partitioner), in channel order per input."""
    outputs: list[OutputEdge] = field(default_factory=list)
    layer: int = 0
    chained_sources: list[tuple[int, Transformation]] = field(default_factory=list)
    """(input index, source) read inside a multiple-input head's task (FLIP-182)."""

    @property
    def name(self) -> str:
        """The chain's operator names, e.g. ``'source -> map -> sink'``; chained sources
        in brackets first: ``'[source:a, source:c] -> join3 -> sink'``."""
        chain = " -> ".join(t.name for t in self.transformations)
        if not self.chained_sources:
            return chain
        return f"[{', '.join(t.name for _, t in self.chained_sources)}] -> {chain}"

    @property
    def all_transformations(self) -> list[Transformation]:
        """The chained sources, then the chain: every operator the vertex's tasks run."""
        return [t for _, t in self.chained_sources] + self.transformations

    def build_operators(self) -> list[StreamOperator]:
        """Fresh operator instances for one subtask."""
        return [t.make_operator() for t in self.transformations]

    def channels_per_input(self, vertices: dict[int, JobVertex]) -> dict[int, int]:
        """How many channels (upstream subtasks) each input has."""
        channels: dict[int, int] = {}
        for upstream, input_index, partitioner in self.inputs:
            count = 1 if partitioner.kind == "forward" else vertices[upstream].parallelism
            channels[input_index] = channels.get(input_index, 0) + count
        return channels

    def channel_base(self, vertices: dict[int, JobVertex]) -> dict[tuple[int, int], int]:
        """The first channel number of each (input index, upstream vertex)."""
        bases: dict[tuple[int, int], int] = {}
        next_free: dict[int, int] = {}
        for upstream, input_index, partitioner in self.inputs:
            start = next_free.get(input_index, 0)
            bases[(input_index, upstream)] = start
            count = 1 if partitioner.kind == "forward" else vertices[upstream].parallelism
            next_free[input_index] = start + count
        return bases


@dataclass
class JobGraph:
    """Vertices by id, with their edges and layers."""

    vertices: dict[int, JobVertex]

    def layers(self) -> list[list[JobVertex]]:
        """Vertices per stage, in id order."""
        depth = max(v.layer for v in self.vertices.values()) + 1
        return [
            sorted((v for v in self.vertices.values() if v.layer == k), key=lambda v: v.id)
            for k in range(depth)
        ]

    def terminal_vertices(self) -> list[JobVertex]:
        """Vertices with no outputs (their acknowledgements go to the final stage)."""
        return [v for v in self.vertices.values() if not v.outputs]

    def to_json(self) -> dict[str, Any]:
        """The graph as checkpoint metadata and the run report keep it: vertices (chained
        operators, task type, parallelism, stage) and edges with their partitioners."""
        vertices = sorted(self.vertices.values(), key=lambda v: v.id)
        return {
            "vertices": [
                {
                    "id": v.id,
                    "name": v.name,
                    "operators": [t.name for t in v.all_transformations],
                    "task_type": v.task_type,
                    "parallelism": v.parallelism,
                    "stage": v.layer,
                }
                for v in vertices
            ],
            "edges": [
                {
                    "source": v.id,
                    "target": edge.target,
                    "input": edge.input_index,
                    "partitioner": str(edge.partitioner),
                    "side_output": edge.side[1] if edge.side else None,
                }
                for v in vertices
                for edge in v.outputs
            ],
        }


def build_job_graph(transformations: list[Transformation]) -> JobGraph:
    """Chain transformations into vertices and layer them. The graph holds copies: the
    defaults it decides (partitioners, followers' parallelism) depend on the source
    counts of this run and must not stay on the job's transformations for the next."""
    transformations = [
        replace(t, inputs=[replace(edge) for edge in t.inputs])
        for t in _without_unchained_followers(transformations)
    ]
    by_id = {t.id: t for t in transformations}
    for t in sorted(transformations, key=lambda t: t.id):
        if t.follows_input:
            t.parallelism = by_id[t.inputs[0].source_id].parallelism
    for t in transformations:
        for edge in t.inputs:
            if edge.partitioner is None:
                upstream_parallelism = by_id[edge.source_id].parallelism
                edge.partitioner = default_partitioner(upstream_parallelism, t.parallelism)
    consumers: dict[int, list[Transformation]] = {t.id: [] for t in transformations}
    for t in transformations:
        for edge in t.inputs:
            if edge.source_id not in by_id:
                raise GraphError(f"'{t.name}' reads from an unknown transformation")
            if edge.side_output is None:  # side outputs never chain: not a main consumer
                consumers[edge.source_id].append(t)
        _check_edges(t, by_id)

    def chains_to_upstream(t: Transformation) -> bool:
        if t.is_source or t.task_type or len(t.inputs) != 1:
            return False
        edge = t.inputs[0]
        upstream = by_id[edge.source_id]
        return (
            _partitioner(edge).kind == "forward"
            and edge.side_output is None
            and upstream.parallelism == t.parallelism
            and len(consumers[upstream.id]) == 1
        )

    chained = _chained_sources(transformations, by_id, consumers)
    vertex_of: dict[int, int] = {}
    vertices: dict[int, JobVertex] = {}
    for t in sorted(transformations, key=lambda t: t.id):
        if t.id in chained:
            continue  # read inside its consumer's task
        if chains_to_upstream(t):
            vertex = vertices[vertex_of[t.inputs[0].source_id]]
            vertex.transformations.append(t)
        else:
            vertex = JobVertex(len(vertices), [t], t.parallelism, _task_type(t))
            vertices[vertex.id] = vertex
            vertex.chained_sources = sorted(
                (index, by_id[source]) for source, (head, index) in chained.items() if head == t.id
            )
        vertex_of[t.id] = vertex.id
    for t in transformations:
        if t.id in chained:
            continue
        target = vertices[vertex_of[t.id]]
        if target.transformations[0] is not t:
            continue
        for edge in t.inputs:
            if edge.source_id in chained:
                continue
            upstream = vertices[vertex_of[edge.source_id]]
            reads = (upstream.id, edge.input_index)
            if any((u, i) == reads for u, i, _ in target.inputs):
                raise GraphError(
                    f"'{t.name}' reads the task '{upstream.name}' twice on input "
                    f"{edge.input_index} (e.g. a union of its main and side output); read "
                    f"them on two inputs (connect) or map one of them first"
                )
            partitioner = _partitioner(edge)
            target.inputs.append((upstream.id, edge.input_index, partitioner))
            side = (by_id[edge.source_id].name, edge.side_output) if edge.side_output else None
            upstream.outputs.append(OutputEdge(target.id, edge.input_index, partitioner, side))
    for vertex in sorted(vertices.values(), key=lambda v: v.id):
        vertex.layer = 1 + max((vertices[u].layer for u, _, _ in vertex.inputs), default=-1)
    return JobGraph(vertices)


def _chained_sources(
    transformations: list[Transformation],
    by_id: dict[int, Transformation],
    consumers: dict[int, list[Transformation]],
) -> dict[int, tuple[int, int]]:
    """Sources chained into a multiple-input head (source id -> (head id, input index)):
    an input fed by one source alone, forward at equal parallelism, read by nothing else,
    that reads no Spark DataFrame (its task has no partition of its own). At least one
    input stays exchanged: it carries the epoch's barrier."""
    side_read = {e.source_id for t in transformations for e in t.inputs if e.side_output}
    chained: dict[int, tuple[int, int]] = {}
    for head in transformations:
        if head.task_type != "multiple-input":
            continue
        edges_of: dict[int, list[InputEdge]] = {}
        for edge in head.inputs:
            edges_of.setdefault(edge.input_index, []).append(edge)
        mine = []
        for index, edges in sorted(edges_of.items()):
            source = by_id[edges[0].source_id]
            if (
                len(edges) == 1
                and source.is_source
                and source.spark_source is None
                and not source.parallelism_from_partitions
                and _partitioner(edges[0]).kind == "forward"
                and edges[0].side_output is None
                and source.parallelism == head.parallelism
                and consumers[source.id] == [head]
                and source.id not in side_read
            ):
                mine.append((source.id, index))
        if len(mine) == len(edges_of):
            mine.pop()  # the last input stays exchanged
        chained.update({source: (head.id, index) for source, index in mine})
    return chained


def _without_unchained_followers(transformations: list[Transformation]) -> list[Transformation]:
    """Leave out each ``follows_input`` transformation whose input feeds other operators
    too (it could not chain, and would cost an exchange of its own): its readers read
    its input instead, through their own partitioners."""
    readers: dict[int, int] = {}
    for t in transformations:
        for edge in t.inputs:
            if edge.side_output is None:
                readers[edge.source_id] = readers.get(edge.source_id, 0) + 1
    left = {
        t.id: t.inputs[0].source_id
        for t in transformations
        if t.follows_input and (t.inputs[0].side_output or readers[t.inputs[0].source_id] > 1)
    }
    if not left:
        return transformations
    kept = []
    for t in transformations:
        if t.id in left:
            continue
        if any(edge.source_id in left for edge in t.inputs):
            inputs = [
                replace(edge, source_id=left.get(edge.source_id, edge.source_id))
                for edge in t.inputs
            ]
            t = replace(t, inputs=inputs)
        kept.append(t)
    return kept


def _task_type(t: Transformation) -> str:
    if t.task_type:
        return t.task_type
    if t.is_source:
        return "source"
    return "two-input" if any(e.input_index == 2 for e in t.inputs) else "one-input"


def _partitioner(edge: InputEdge) -> Partitioner:
    """The edge's partitioner, once the plan has given every edge one."""
    if edge.partitioner is None:
        raise GraphError(f"the edge from transformation {edge.source_id} has no partitioner")
    return edge.partitioner


def _check_edges(t: Transformation, by_id: dict[int, Transformation]) -> None:
    for edge in t.inputs:
        upstream = by_id[edge.source_id]
        if _partitioner(edge).kind == "forward" and upstream.parallelism != t.parallelism:
            raise GraphError(
                f"forward edge '{upstream.name}' (parallelism {upstream.parallelism}) -> "
                f"'{t.name}' (parallelism {t.parallelism}) needs equal parallelism; "
                f"call rebalance() before changing parallelism"
            )


def default_partitioner(upstream_parallelism: int, parallelism: int) -> Partitioner:
    """Forward where parallelism matches (chainable), else rebalance (Flink's default)."""
    return FORWARD if upstream_parallelism == parallelism else REBALANCE


def is_two_input(operator: StreamOperator) -> bool:
    """True for operators that take two inputs."""
    return isinstance(operator, TwoInputStreamOperator)
