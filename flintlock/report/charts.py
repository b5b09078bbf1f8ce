"""The report's charts, drawn by matplotlib as inline SVG whose text stays text.

matplotlib is the ``report`` extra; ``load_pyplot`` refuses clearly when it is missing.
Each function returns one ``<svg>`` element as a string, ready to inline in the page.
"""

from __future__ import annotations

import io
from collections import Counter
from typing import TYPE_CHECKING, Any

from flintlock.report.model import (
    GANTT_PHASES,
    Epoch,
    Layout,
    PhaseSpan,
    Vertex,
    watermark_value,
)
from flintlock.sinks.optional import require

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PHASE_COLORS = dict(
    zip(
        GANTT_PHASES,
        ("#8dd3c7", "#bebada", "#80b1d3", "#fdb462", "#b3de69", "#fb8072", "#d9d9d9"),
        strict=True,
    )
)
MAX_GANTT_ROWS = 48
"""Subtask rows the Gantt chart draws at most: the newest epochs that fit."""


def load_pyplot() -> Any:
    """matplotlib's pyplot on the SVG backend, text kept as text (``svg.fonttype``)."""
    matplotlib = require("matplotlib", "report", "flintlock report")
    matplotlib.use("svg", force=True)
    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["font.family"] = "sans-serif"
    return require("matplotlib.pyplot", "report", "flintlock report")


def to_svg(figure: Figure) -> str:
    """The figure as one ``<svg>`` element (no XML prolog), then closed."""
    plt = load_pyplot()
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def graph_chart(layout: Layout) -> str:
    """Vertices as boxes by stage (left to right), each with its parallelism in every run
    of the layout; edges as arrows named by partitioner."""
    plt = load_pyplot()
    vertices, edges = layout.vertices, layout.edges
    stages: dict[int, list[Vertex]] = {}
    for vertex in vertices:
        stages.setdefault(vertex.stage, []).append(vertex)
    height = max((len(column) for column in stages.values()), default=1)
    figure, axes = plt.subplots(figsize=(3.0 * max(len(stages), 1) + 1, 1.2 * height + 0.6))
    where: dict[int, tuple[float, float]] = {}
    for stage, column in stages.items():
        for row, vertex in enumerate(sorted(column, key=lambda v: v.id)):
            where[vertex.id] = (stage * 4.0, -row * 1.3 - (height - len(column)) * 0.65)
    for edge in edges:
        (x0, y0), (x1, y1) = where[edge.source], where[edge.target]
        axes.annotate(
            "",
            xy=(x1 - 1.05, y1),
            xytext=(x0 + 1.05, y0),
            arrowprops={"arrowstyle": "->", "color": "#555"},
        )
        label = edge.partitioner + (f" [{edge.side_output}]" if edge.side_output else "")
        label = label if len(label) <= 28 else label[:27] + "…"  # the edge table has it all
        axes.text((x0 + x1) / 2, (y0 + y1) / 2 + 0.12, label, ha="center", fontsize=7)
    for vertex in vertices:
        x, y = where[vertex.id]
        kind = f"{vertex.task_type}, parallelism {layout.parallelism_text(vertex)}"
        text = "\n".join([*vertex.operators, kind])
        axes.text(
            x,
            y,
            text,
            ha="center",
            va="center",
            fontsize=8,
            bbox={"boxstyle": "round", "facecolor": "#e8f0fe", "edgecolor": "#4a6fa5"},
        )
    xs = [x for x, _ in where.values()] or [0.0]
    ys = [y for _, y in where.values()] or [0.0]
    axes.set_xlim(min(xs) - 1.4, max(xs) + 1.4)
    axes.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    axes.axis("off")
    return to_svg(figure)


def epochs_chart(
    epochs: list[Epoch], failed_at: list[int], run_numbers: dict[str, int] | None = None
) -> str:
    """Each epoch's duration as a bar (by checkpoint id, one colour per run, named by its
    number in ``run_numbers`` as the runs table and the graph name it), its rows on
    a second axis; red lines where a run failed (the epoch it failed in), labelled above
    the plot, where no bar or line of a later run can cover the label."""
    plt = load_pyplot()
    figure, axes = plt.subplots(figsize=(8, 3))
    runs = list(dict.fromkeys(epoch.run_id for epoch in epochs))
    colors = plt.get_cmap("tab10")
    for index, run in enumerate(runs):
        mine = [e for e in epochs if e.run_id == run]
        axes.bar(
            [e.checkpoint_id for e in mine],
            [e.seconds for e in mine],
            color=colors(index % 10),
            label=f"run {(run_numbers or {}).get(run, run)}",
        )
    for checkpoint_id in failed_at:
        axes.axvline(checkpoint_id, color="red", linestyle="--")
    axes.xaxis.set_major_locator(integer_ticks())
    axes.set_xlabel("checkpoint (epoch)")
    axes.set_ylabel("seconds")
    rows = axes.twinx()
    rows.plot([e.checkpoint_id for e in epochs], [e.rows for e in epochs], "k.-", label="rows")
    rows.set_ylabel("rows read")
    axes.legend(loc="upper left", fontsize=8)
    for checkpoint_id, count in sorted(Counter(failed_at).items()):
        label = "failed" if count == 1 else f"failed {count} times"
        rows.text(  # the twin axes draws last: its text is on top of everything
            checkpoint_id,
            1.01,
            label,
            transform=rows.get_xaxis_transform(),
            color="red",
            ha="center",
            va="bottom",
            fontsize=8,
            clip_on=False,
            gid=f"failed-chk-{checkpoint_id}",
        )
    return to_svg(figure)


def watermarks_chart(epochs: list[Epoch]) -> str:
    """Each vertex's watermark after every epoch that recorded watermarks."""
    plt = load_pyplot()
    figure, axes = plt.subplots(figsize=(8, 3))
    series: dict[str, list[tuple[int, float]]] = {}
    for epoch in epochs:
        for name, value in (epoch.watermarks or {}).items():
            number = watermark_value(value)
            if number is not None:
                series.setdefault(name, []).append((epoch.checkpoint_id, number))
    for name, points in series.items():
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    axes.xaxis.set_major_locator(integer_ticks())
    axes.set_xlabel("checkpoint (epoch)")
    axes.set_ylabel("watermark (ms)")
    if series:  # a job without event time has no watermark to name
        axes.legend(loc="upper left", fontsize=8)
    return to_svg(figure)


def integer_ticks() -> Any:
    """At most ten ticks on whole numbers (checkpoint ids)."""
    ticker = require("matplotlib.ticker", "report", "flintlock report")
    return ticker.MaxNLocator(nbins=10, integer=True)


def gantt_chart(spans: list[PhaseSpan]) -> str:
    """One row per subtask and epoch, one coloured bar per lifecycle phase, time measured
    from the epoch's first phase; the newest epochs that fit ``MAX_GANTT_ROWS``."""
    plt = load_pyplot()
    rows: dict[tuple[int, str, int], list[PhaseSpan]] = {}
    for span in spans:
        rows.setdefault((span.checkpoint_id, span.task_name, span.subtask_index), []).append(span)
    keys = sorted(rows)[-MAX_GANTT_ROWS:]
    epoch_start: dict[int, float] = {}
    for key in keys:
        first = min(s.start for s in rows[key])
        epoch_start[key[0]] = min(epoch_start.get(key[0], first), first)
    figure, axes = plt.subplots(figsize=(9, 0.32 * len(keys) + 1.2))
    for y, key in enumerate(keys):  # one collection per row: fast with many epochs
        zero = epoch_start[key[0]]
        bars = [((s.start - zero) * 1000, max((s.end - s.start) * 1000, 0.05)) for s in rows[key]]
        colors = [PHASE_COLORS[s.phase] for s in rows[key]]
        axes.broken_barh(bars, (y - 0.4, 0.8), facecolors=colors)
    axes.set_yticks(range(len(keys)))
    axes.set_yticklabels([f"chk-{c} {name} [{i}]" for c, name, i in keys], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("ms since the epoch's first phase")
    handles = [plt.Rectangle((0, 0), 1, 1, color=PHASE_COLORS[p]) for p in GANTT_PHASES]
    axes.legend(handles, GANTT_PHASES, loc="lower right", fontsize=7, ncol=4)
    return to_svg(figure)
