"""The report as one self-contained HTML page: inline CSS, SVG and script, no link.

A browser opening it fetches nothing: every chart is inlined matplotlib SVG and every
figure is also a plain table, so it reads without the charts too. Tables longer than
``PAGE_ROWS`` hold every row and show one page of them at a time (``PAGER``, a small
inline script; without script every row shows).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from html import escape

from flintlock.core.events import MAX_TIMESTAMP
from flintlock.report import charts
from flintlock.report.model import (
    GANTT_PHASES,
    Layout,
    RunReport,
    Vertex,
    runs_text,
    watermark_value,
)

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1100px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f0f3f8; } td.num { text-align: right; }
.chart svg { max-width: 100%; height: auto; } .none { color: #777; font-style: italic; }
tr.failed td { background: #fde8e8; }
.pager { font-size: 0.85em; margin-top: 0.6em; } .pager button { margin-right: 0.3em; }
.pager span { margin: 0 0.6em; }
"""
PAGE_ROWS = 25
"""Rows a long table shows at a time; every row is in the page."""
PAGER = """
for (const table of document.querySelectorAll("table.paged")) {
  const rows = Array.from(table.tBodies[0].rows);
  const size = Number(table.dataset.pageRows);
  const pages = Math.ceil(rows.length / size);
  const bar = document.createElement("div");
  bar.className = "pager";
  const status = document.createElement("span");
  const button = (label, go) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", () => show(go()));
    bar.append(b);
    return b;
  };
  let page = 0;
  const first = button("first", () => 0);
  const previous = button("previous", () => Math.max(page - 1, 0));
  bar.append(status);
  const next = button("next", () => Math.min(page + 1, pages - 1));
  const last = button("last", () => pages - 1);
  button("show all", () => -1);
  const show = (wanted) => {
    page = wanted;
    rows.forEach((row, i) => { row.hidden = page >= 0 && Math.floor(i / size) !== page; });
    status.textContent = page < 0 ? `all ${rows.length} rows`
      : `rows ${page * size + 1}-${Math.min((page + 1) * size, rows.length)} of ${rows.length}`;
    first.disabled = page === 0;
    previous.disabled = page <= 0;
    next.disabled = page < 0 || page >= pages - 1;
    last.disabled = page === pages - 1;
  };
  table.before(bar);
  show(0);
}
"""


def render_page(report: RunReport) -> str:
    """The whole report page of ``report``."""
    sections = [
        _header(report),
        _runs_section(report),
        _graph_section(report),
        _epochs_section(report),
        _watermarks_section(report),
        _phases_section(report),
        _failures_section(report),
        _metrics_section(report),
    ]
    title = escape(f"flintlock report: {report.job_name}")
    body = "\n".join(sections)
    script = f"<script>{PAGER}</script>" if 'class="paged"' in body else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{STYLE}</style></head><body>\n"
        + body
        + f"\n{script}</body></html>\n"
    )


def table(headers: Iterable[str], rows: Iterable[Iterable[object]], css_id: str = "") -> str:
    """An HTML table; numbers right-aligned, everything escaped."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{value:,}</td>'
            if isinstance(value, int) and not isinstance(value, bool)
            else f"<td>{escape(str(value))}</td>"
            for value in row
        )
        body.append(f"<tr>{cells}</tr>")
    ident = f' id="{css_id}"' if css_id else ""
    if len(body) > PAGE_ROWS:
        ident += f' class="paged" data-page-rows="{PAGE_ROWS}"'
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


def _none(text: str) -> str:
    return f'<p class="none">{escape(text)}</p>'


def _chart(svg: str) -> str:
    return f'<div class="chart">{svg}</div>'


def _header(report: RunReport) -> str:
    return (
        f"<h1>{escape(report.job_name)}</h1>"
        f"<p>status <b>{escape(report.status or 'never ran')}</b> · job id "
        f"{escape(report.job_id)} · folder {escape(report.folder)}</p>"
    )


def _runs_section(report: RunReport) -> str:
    if not report.runs:
        return "<h2>Runs</h2>" + _none("no run recorded")
    rows = []
    for number, run in enumerate(report.runs, 1):
        done = checkpoint_ranges(run.checkpoints) or "none"
        restored = "-" if run.restored_from is None else f"chk-{run.restored_from}"
        failure = run.failure
        ended = "-"
        if failure is not None:
            where = f" in chk-{failure.checkpoint_id}" if failure.checkpoint_id else ""
            ended = f"failed{where}: {failure.operator or failure.task_name or failure.error_type}"
            ended += f", {failure.phase}" if failure.phase else ""
        rows.append((number, run.run_id, _when(run.started), restored, done, ended))
    headers = ("#", "run", "started", "restored from", "checkpoints completed", "failure")
    return "<h2>Runs</h2>" + table(headers, rows, "runs")


def checkpoint_ranges(checkpoints: list[int]) -> str:
    """ "chk-1..chk-120, chk-122": consecutive checkpoints as one range each."""
    ranges: list[list[int]] = []
    for checkpoint_id in sorted(checkpoints):
        if ranges and checkpoint_id == ranges[-1][-1] + 1:
            ranges[-1].append(checkpoint_id)
        else:
            ranges.append([checkpoint_id])
    return ", ".join(f"chk-{r[0]}" if len(r) == 1 else f"chk-{r[0]}..chk-{r[-1]}" for r in ranges)


def _graph_section(report: RunReport) -> str:
    """One graph (chart, vertex and edge tables) per shape the runs had; each vertex's
    parallelism per run where the runs differ (a restore at another parallelism)."""
    if not report.layouts:
        return "<h2>Job graph</h2>" + _none("no graph recorded")
    several = len(report.layouts) > 1
    parts = ["<h2>Job graph</h2>"]
    for index, layout in enumerate(report.layouts):
        newest = index == len(report.layouts) - 1
        if several:
            parts.append(f"<h3>{escape(runs_text(layout.runs).capitalize())}</h3>")
        parts.append(_layout(layout, "" if newest else f"-{index + 1}"))
    return "".join(parts)


def _layout(layout: Layout, suffix: str) -> str:
    names = {v.id: v.name for v in layout.vertices}
    vertices = table(
        ("vertex", "operators", "task type", "parallelism", "stage"),
        (
            (v.name, ", ".join(v.operators), v.task_type, _parallelism(layout, v), v.stage)
            for v in layout.vertices
        ),
        f"vertices{suffix}",
    )
    edges = table(
        ("from", "to", "input", "partitioner"),
        (
            (names[e.source], names[e.target], e.input, e.partitioner + _side(e.side_output))
            for e in layout.edges
        ),
        f"edges{suffix}",
    )
    return _chart(charts.graph_chart(layout)) + vertices + edges


def _parallelism(layout: Layout, vertex: Vertex) -> int | str:
    text = layout.parallelism_text(vertex)
    return int(text) if text.isdigit() else text


def _side(tag: str | None) -> str:
    return f" (side output {tag})" if tag else ""


def _epochs_section(report: RunReport) -> str:
    if not report.epochs:
        return "<h2>Epochs</h2>" + _none("no epoch completed")
    failed_at = [f.checkpoint_id for f in report.failures if f.checkpoint_id is not None]
    numbers = {run.run_id: number for number, run in enumerate(report.runs, 1)}
    chart = _chart(charts.epochs_chart(report.epochs, failed_at, numbers))
    rows = (
        (
            f"chk-{e.checkpoint_id}",
            e.run_id,
            e.kind + (" (final)" if e.final else ""),
            f"{e.seconds:.3f}",
            e.rows,
            "; ".join(f"{n} {e.records_in.get(n, 0):,} → {c:,}" for n, c in e.records_out.items()),
            e.checkpoint_bytes,
            _when(e.time),
        )
        for e in report.epochs
    )
    headers = ("checkpoint", "run", "kind", "seconds", "rows", "records in → out", "bytes", "at")
    return f"<h2>Epochs</h2>{chart}{table(headers, rows, 'epochs')}"


NO_EVENT_TIME = "This job has no event time: none of its epochs recorded a watermark."


def _watermarks_section(report: RunReport) -> str:
    if not report.has_watermarks:
        return "<h2>Watermarks</h2>" + _none(NO_EVENT_TIME)
    rows = (
        (f"chk-{e.checkpoint_id}", name, _watermark_text(value))
        for e in report.epochs
        for name, value in (e.watermarks or {}).items()
    )
    chart = _chart(charts.watermarks_chart(report.epochs))
    return f"<h2>Watermarks</h2>{chart}" + table(
        ("checkpoint", "vertex", "watermark"), rows, "watermarks"
    )


def _watermark_text(value: object) -> str:
    if isinstance(value, int) and value >= MAX_TIMESTAMP:
        return "end of input (MAX_WATERMARK)"
    number = watermark_value(value)
    return "-" if number is None else f"{number:,.0f}"


def _phases_section(report: RunReport) -> str:
    title = "<h2>Lifecycle phases per subtask</h2>"
    if not report.phases:
        return title + _none("no lifecycle phases recorded")
    rows = {(s.checkpoint_id, s.task_name, s.subtask_index) for s in report.phases}
    note = ""
    if len(rows) > charts.MAX_GANTT_ROWS:
        note = (
            f"<p>The newest {charts.MAX_GANTT_ROWS} of {len(rows)} subtask rows "
            f"(epoch, task, subtask); times from each epoch's first phase; the table "
            f"below has every row.</p>"
        )
    return title + note + _chart(charts.gantt_chart(report.phases)) + _phases_table(report)


def _phases_table(report: RunReport) -> str:
    """Each subtask's phase durations (ms) in each epoch, a row per epoch and subtask."""
    durations: dict[tuple[int, str, int], dict[str, float]] = {}
    for span in report.phases:
        key = (span.checkpoint_id, span.task_name, span.subtask_index)
        durations.setdefault(key, {})[span.phase] = (span.end - span.start) * 1000
    rows = (
        (
            f"chk-{checkpoint_id}",
            task,
            subtask,
            *(f"{phases[p]:,.1f}" if p in phases else "-" for p in GANTT_PHASES),
        )
        for (checkpoint_id, task, subtask), phases in sorted(durations.items())
    )
    headers = ("checkpoint", "task", "subtask", *(f"{p} ms" for p in GANTT_PHASES))
    return table(headers, rows, "phases")


def _failures_section(report: RunReport) -> str:
    if not report.failures:
        return "<h2>Failures</h2>" + _none("no failure recorded")
    rows = [
        (
            _when(f.time),
            f.run_id,
            f"chk-{f.checkpoint_id}" if f.checkpoint_id is not None else "-",
            f.task_name or "-",
            "-" if f.subtask_index is None else f.subtask_index,
            f.operator or "-",
            f.phase or "-",
            f.cause or f"{f.error_type}: {f.message.splitlines()[0] if f.message else ''}",
        )
        for f in report.failures
    ]
    headers = ("at", "run", "epoch", "task", "subtask", "operator", "phase", "cause")
    return "<h2>Failures</h2>" + table(headers, rows, "failures").replace(
        "<tr><td", '<tr class="failed"><td'
    )


def _metrics_section(report: RunReport) -> str:
    """One row per epoch and vertex of its own metrics; its operators' metrics (nested
    names) for the newest epoch only, so the page stays short over many epochs."""
    if not report.metrics:
        return "<h2>Metrics</h2>" + _none("no metrics recorded")
    names = sorted(
        {n for v in report.metrics.values() for m in v.values() for n in m if "." not in n}
    )
    names = [n for n in names if _has_event_time(report, n)]
    rows = (
        (f"chk-{checkpoint_id}", vertex, *(_metric_text(n, values.get(n)) for n in names))
        for checkpoint_id, vertices in report.metrics.items()
        for vertex, values in vertices.items()
    )
    epochs = table(("checkpoint", "vertex", *names), rows, "metrics")
    newest = max(report.metrics)
    nested = [
        (vertex, name, _metric_text(name, value))
        for vertex, values in report.metrics[newest].items()
        for name, value in sorted(values.items())
        if "." in name and _has_event_time(report, name)
    ]
    operators = ""
    if nested:
        operators = f"<p>Operators and user metrics of chk-{newest}:</p>" + table(
            ("vertex", "metric", "value"), nested, "operator-metrics"
        )
    return "<h2>Metrics</h2>" + epochs + operators


def _has_event_time(report: RunReport, name: str) -> bool:
    """False for a watermark metric no vertex ever had an event time in (only missing or
    the end of input): its column would be "-" all the way down."""
    if "atermark" not in name:
        return True
    return any(
        values[name] < MAX_TIMESTAMP
        for vertices in report.metrics.values()
        for values in vertices.values()
        if name in values
    )


def _metric_text(name: str, value: float | None) -> str:
    if value is None:
        return "-"
    if "atermark" in name and value >= MAX_TIMESTAMP:
        return "end of input"
    return f"{value:,.6g}"
