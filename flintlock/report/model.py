"""What a run report shows, read from a job's folder: the graph, the epochs, the
watermarks, each subtask's lifecycle phases, the failures and the metrics.

Everything comes from the folder's run log (``core/job/run_log.py``), its result store
and, for jobs that ran before the log existed, the latest checkpoint's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from flintlock.core.checkpoint.coordinator import METADATA
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.reader import list_checkpoints
from flintlock.core.events import MAX_TIMESTAMP
from flintlock.core.job.run_log import read_log
from flintlock.report.pressure import backpressured_ms_per_second

GANTT_PHASES = ("setup", "initialize_state", "open", "run", "finish", "snapshot", "close")
"""The lifecycle phases the Gantt chart draws, in invoke order."""


@dataclass(frozen=True)
class Vertex:
    """One task of the graph: its chained operators, task type and parallelism."""

    id: int
    name: str
    operators: list[str]
    task_type: str
    parallelism: int
    stage: int


@dataclass(frozen=True)
class Edge:
    """An exchange between two vertices and how it partitions."""

    source: int
    target: int
    partitioner: str
    input: int = 1
    side_output: str | None = None


@dataclass(frozen=True)
class Layout:
    """One shape of the job graph (vertices and edges, parallelism aside), the runs that
    had it (numbered from 1 in start order) and each vertex's parallelism in each of them:
    a restore at another parallelism keeps the shape and changes the parallelism."""

    runs: list[int]
    vertices: list[Vertex]
    """As the newest of ``runs`` had them."""
    edges: list[Edge]
    parallelism: dict[int, dict[int, int]]
    """vertex id -> run number -> the vertex's parallelism in that run."""

    def parallelism_text(self, vertex: Vertex) -> str:
        """ "2" when every run had the same, else each value and its runs:
        "2 (runs 1, 2), 4 (run 3)"."""
        runs_of: dict[int, list[int]] = {}
        for run, parallelism in self.parallelism.get(vertex.id, {}).items():
            runs_of.setdefault(parallelism, []).append(run)
        if len(runs_of) <= 1:
            return str(vertex.parallelism)
        return ", ".join(f"{p} ({runs_text(runs)})" for p, runs in runs_of.items())


def runs_text(runs: list[int]) -> str:
    """ "run 3" or "runs 1, 2"."""
    return ("run " if len(runs) == 1 else "runs ") + ", ".join(map(str, runs))


@dataclass(frozen=True)
class Epoch:
    """One completed checkpoint's epoch: how long it took, rows, size, watermarks."""

    checkpoint_id: int
    run_id: str
    kind: str
    final: bool
    seconds: float
    time: float
    records_in: dict[str, int]
    records_out: dict[str, int]
    checkpoint_bytes: int
    watermarks: dict[str, Any] | None
    """``figures["watermarks"]`` as the epoch recorded it, None when it recorded none."""
    rows: int
    """Rows the epoch's sources read (vertices with no input), else every vertex's."""
    commits: dict[str, float] = field(default_factory=dict)
    """Sink name -> the seconds its commit of the epoch's checkpoint took (none logged
    when an earlier driver's commit was completed at a restart)."""
    spark: dict[str, Any] | None = None
    """Where Spark's UI shows the epoch: ``ui`` (its address), ``jobs`` and ``stages``
    (ids); None when the session had no UI."""
    state_bytes: dict[str, int] = field(default_factory=dict)
    """Vertex name -> bytes of managed state over its subtasks (``stateSizeBytes`` of the
    epoch's metrics, where taken; ``read_report`` fills it)."""
    backpressured: dict[str, float] = field(default_factory=dict)
    """Vertex name -> ms per second its subtasks waited on slower vertices downstream
    (``report/pressure.py``; ``read_report`` fills it); empty when the epoch recorded no
    lifecycle phases."""


@dataclass(frozen=True)
class PhaseSpan:
    """One lifecycle phase of one subtask in one epoch, wall-clock seconds."""

    checkpoint_id: int
    task_name: str
    subtask_index: int
    phase: str
    start: float
    end: float


@dataclass(frozen=True)
class Failure:
    """A failed run: where (task, subtask, operator, phase, epoch) and why."""

    run_id: str
    time: float
    error_type: str
    message: str
    task_name: str | None = None
    subtask_index: int | None = None
    operator: str | None = None
    phase: str | None = None
    checkpoint_id: int | None = None
    cause: str | None = None


@dataclass(frozen=True)
class Run:
    """One run of the job: its epochs, what it restored, and its failure if it failed."""

    run_id: str
    started: float
    checkpoints: list[int]
    restored_from: int | None
    """The checkpoint the run's first epoch restored (None: it started empty)."""
    failure: Failure | None


@dataclass
class RunReport:
    """Everything ``flintlock report`` draws, for one job."""

    job_name: str
    job_id: str
    folder: str
    status: str | None
    vertices: list[Vertex] = field(default_factory=list)
    """The newest run's graph (with its parallelism); ``layouts`` has every run's."""
    edges: list[Edge] = field(default_factory=list)
    layouts: list[Layout] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    epochs: list[Epoch] = field(default_factory=list)
    phases: list[PhaseSpan] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    metrics: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)
    """checkpoint id -> vertex -> metric name -> value summed over its subtasks."""

    @property
    def has_watermarks(self) -> bool:
        """True when any epoch recorded an event-time watermark: a job without event time
        records "none yet" every epoch and, at the end of a bounded input, MAX_WATERMARK."""
        return any(
            watermark_value(value) is not None
            for epoch in self.epochs
            for value in (epoch.watermarks or {}).values()
        )


def watermark_value(value: Any) -> float | None:
    """A watermark as a number: itself, or the lowest of a per-subtask mapping or list;
    None for none yet and for MAX_WATERMARK (the input ended: nothing to plot)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return None if value >= MAX_TIMESTAMP else float(value)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        numbers = [v for v in (watermark_value(item) for item in value) if v is not None]
        return min(numbers) if numbers else None
    return None


def read_report(folder: JobFolder, known: dict[str, dict[str, Any]] | None = None) -> RunReport:
    """The report of the job in ``folder`` (opened): its run log (the entries ``known``
    from an earlier read are not read again), result and graph."""
    log = read_log(folder, known)
    record = folder.read_record()
    report = RunReport(
        job_name=folder.job_name,
        job_id=folder.job_id,
        folder=folder.path,
        status=record.status if record is not None else None,
    )
    graphs = [(number, run.get("graph")) for number, run in enumerate(log["runs"], 1)]
    if not log["runs"]:
        graphs = [(0, _graph_of_latest_checkpoint(folder))]
    report.layouts = layouts_of([(number, graph) for number, graph in graphs if graph])
    if report.layouts:
        report.vertices = report.layouts[-1].vertices
        report.edges = report.layouts[-1].edges
    sources = tuple(
        v.name for v in report.vertices if not any(e.target == v.id for e in report.edges)
    )
    names = {v.id: v.name for v in report.vertices}
    links = [(e.source, e.target) for e in report.edges]
    for entry in sorted(log["epochs"], key=lambda e: e["checkpoint_id"]):
        metrics = metrics_of(entry)
        state = {
            name: int(m["stateSizeBytes"]) for name, m in metrics.items() if "stateSizeBytes" in m
        }
        pressure = backpressured_ms_per_second(entry, names, links)
        epoch = replace(epoch_of(entry, sources), state_bytes=state, backpressured=pressure)
        report.epochs.append(epoch)
        report.phases.extend(phases_of(entry))
        if metrics:
            report.metrics[entry["checkpoint_id"]] = metrics
    report.failures = [failure_of(entry) for entry in log["failures"]]
    report.runs = [run_of(run, log["epochs"], report.failures) for run in log["runs"]]
    return report


def layouts_of(graphs: list[tuple[int, dict[str, Any]]]) -> list[Layout]:
    """The distinct graph shapes of the runs (run number, graph; 0 for a graph that no
    run recorded), in the order they first ran but the newest run's shape last; each
    vertex's parallelism in each run."""
    shapes: dict[str, list[tuple[int, list[Vertex], list[Edge]]]] = {}
    for number, graph in graphs:
        vertices = [Vertex(**v) for v in graph["vertices"]]
        edges = [Edge(**e) for e in graph["edges"]]
        shape = repr(([replace(v, parallelism=0) for v in vertices], edges))
        shapes.setdefault(shape, []).append((number, vertices, edges))
    layouts = []
    for runs in shapes.values():
        _, vertices, edges = runs[-1]
        parallelism: dict[int, dict[int, int]] = {}
        for number, run_vertices, _ in runs:
            for vertex in run_vertices:
                parallelism.setdefault(vertex.id, {})[number] = vertex.parallelism
        numbers = [number for number, _, _ in runs]
        layouts.append(Layout(numbers, vertices, edges, parallelism))
    newest = graphs[-1][0] if graphs else None
    return sorted(layouts, key=lambda layout: newest in layout.runs)


def run_of(run: dict[str, Any], epochs: list[dict[str, Any]], failures: list[Failure]) -> Run:
    """A run: its completed checkpoints, the one it restored first, its last failure."""
    run_id = str(run["run_id"])
    mine = sorted((e for e in epochs if e["run_id"] == run_id), key=lambda e: e["checkpoint_id"])
    failed = [f for f in failures if f.run_id == run_id]
    return Run(
        run_id=run_id,
        started=float(run.get("started", 0.0)),
        checkpoints=[e["checkpoint_id"] for e in mine],
        restored_from=mine[0].get("restored_from") if mine else None,
        failure=failed[-1] if failed else None,
    )


def epoch_of(entry: dict[str, Any], sources: tuple[str, ...] = ()) -> Epoch:
    """An epoch row from a run log entry: rows and bytes summed over its subtasks."""
    figures = entry.get("figures") or {}
    records_in: dict[str, int] = {}
    records_out: dict[str, int] = {}
    size = 0
    for subtask in entry.get("subtasks", []):
        name = subtask["task_name"]
        records_in[name] = records_in.get(name, 0) + subtask.get("records_in", 0)
        records_out[name] = records_out.get(name, 0) + subtask.get("records_out", 0)
        size += subtask.get("size_bytes", 0)
    return Epoch(
        checkpoint_id=entry["checkpoint_id"],
        run_id=entry["run_id"],
        kind=figures.get("kind", "checkpoint"),
        final=bool(figures.get("final", False)),
        seconds=float(figures.get("seconds", 0.0)),
        time=float(figures.get("time", 0.0)),
        records_in=records_in,
        records_out=records_out,
        checkpoint_bytes=size,
        watermarks=figures.get("watermarks"),
        rows=sum(n for name, n in records_in.items() if name in sources or not sources),
        commits=dict(figures.get("commits") or {}),
        spark=figures.get("spark"),
    )


def phases_of(entry: dict[str, Any]) -> list[PhaseSpan]:
    """Every subtask's Gantt phases in an epoch, in invoke order."""
    spans = []
    for subtask in entry.get("subtasks", []):
        recorded = subtask.get("lifecycle_phases") or {}
        for phase in GANTT_PHASES:
            if phase in recorded:
                start, end = recorded[phase]
                spans.append(
                    PhaseSpan(
                        entry["checkpoint_id"],
                        subtask["task_name"],
                        subtask["subtask_index"],
                        phase,
                        start,
                        end,
                    )
                )
    return spans


def metrics_of(entry: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each vertex's numeric metrics in an epoch (the acknowledgements' ``metrics``),
    nested names joined with dots, over the vertex's subtasks: watermarks the lowest (as
    Flink's input watermark), everything else summed (counts, bytes, times, rates);
    the acknowledgement's wall-clock ``time`` and its ``executor`` (pid) left out."""
    found: dict[str, dict[str, float]] = {}
    for subtask in entry.get("subtasks", []):
        metrics = subtask.get("metrics")
        if not isinstance(metrics, dict) or not metrics:  # {}: metrics were off
            continue
        merged = found.setdefault(subtask["task_name"], {})
        for name, value in _numeric_leaves(metrics, ""):
            if name == "time" or name.endswith(".time") or name.startswith("executor."):
                continue  # when and where (executor id, pid): no figure to add up
            if "atermark" in name and name in merged:
                merged[name] = min(merged[name], value)
            else:
                merged[name] = merged.get(name, 0.0) + value
    return found


def failure_of(entry: dict[str, Any]) -> Failure:
    """A failure row: the subtask's report when one came with the error."""
    report = entry.get("report") or {}
    cause = None
    if report:
        cause = f"{report.get('cause_type')}: {report.get('cause_message')}"
    return Failure(
        run_id=entry["run_id"],
        time=float(entry.get("time", 0.0)),
        error_type=entry.get("error_type", "?"),
        message=entry.get("message", ""),
        task_name=report.get("task_name"),
        subtask_index=report.get("subtask_index"),
        operator=report.get("operator"),
        phase=report.get("phase"),
        checkpoint_id=report.get("checkpoint_id"),
        cause=cause,
    )


def _graph_of_latest_checkpoint(folder: JobFolder) -> dict[str, Any] | None:
    """The graph recorded in the newest checkpoint's metadata, for a job with no run log."""
    completed = [c for c in list_checkpoints(folder.path, folder.storage) if c.completed]
    if not completed:
        return None
    metadata = folder.storage.read_json(f"{completed[-1].path}/{METADATA}")
    return metadata.get("graph") if isinstance(metadata, dict) else None


def _numeric_leaves(document: dict[str, Any], prefix: str) -> list[tuple[str, float]]:
    leaves = []
    for key, value in document.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            leaves.append((name, float(value)))
        elif isinstance(value, dict):
            leaves.extend(_numeric_leaves(value, f"{name}."))
    return leaves
