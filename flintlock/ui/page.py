"""The live page: one HTML document with its style and script inline (it fetches nothing
but the app's JSON), polling ``/api/jobs`` and the shown job's ``/api/jobs/{name}`` each
second and redrawing only what changed: the jobs list, the job graph, the checkpoints
(newest first, a page of ``PAGE_ROWS`` at a time), the runs and the failures."""

from __future__ import annotations

PAGE_ROWS = 25
"""Rows a table shows at a time; the pager goes through the rest."""

STYLE = """
body { font-family: sans-serif; margin: 1.2em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .4em 0; } h2 { font-size: 1.1em; margin-top: 1.4em;
  border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .2em .5em; text-align: left; }
th { background: #f0f3f8; } td.num { text-align: right; }
.status-RUNNING { color: #1a7f37; font-weight: bold; } .status-FAILED { color: #b42318; }
.muted { color: #777; } .pager button, .controls button { margin-right: .4em; }
svg text { font-size: 12px; } .vertex rect { fill: #eef4ff; stroke: #4a6fa5; }
.edge path { stroke: #888; fill: none; marker-end: url(#arrow); }
.edge text { fill: #555; font-size: 11px; }
"""

SCRIPT = """
const PAGE_ROWS = __PAGE_ROWS__;
const shown = {};
const pages = {};
const SAVED = (() => {
  // a saved page (flintlock report) carries every document it draws; a live one fetches
  const node = document.getElementById("flintlock-data");
  return node ? JSON.parse(node.textContent) : null;
})();
async function load(path) {
  if (SAVED) {
    const body = SAVED.documents[path];
    return body === undefined
      ? {ok: false, body: {error: `${path} is not saved in this page`}} : {ok: true, body};
  }
  const response = await fetch(path);
  return {ok: response.ok, body: await response.json()};
}
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}
function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}
function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleTimeString() : "";
}
function table(id, headers, rows) {
  const holder = document.getElementById(id);
  const page = Math.min(pages[id] || 0, Math.max(0, Math.ceil(rows.length / PAGE_ROWS) - 1));
  pages[id] = page;
  const body = el("tbody");
  for (const row of rows.slice(page * PAGE_ROWS, (page + 1) * PAGE_ROWS)) {
    body.append(el("tr", {}, ...row.map(
      (cell) => el("td", typeof cell === "number" ? {class: "num"} : {}, cell))));
  }
  const head = el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h))));
  const parts = [el("table", {id: id + "-table"}, head, body)];
  if (rows.length > PAGE_ROWS) {
    const last = Math.ceil(rows.length / PAGE_ROWS) - 1;
    const go = (to) => { pages[id] = to; shown[id] = null; refresh(); };
    const back = el("button", {}, "newer"); back.onclick = () => go(Math.max(0, page - 1));
    const next = el("button", {}, "older"); next.onclick = () => go(Math.min(last, page + 1));
    parts.push(el("div", {class: "pager"}, back, next,
      el("span", {}, `rows ${page * PAGE_ROWS + 1}-${Math.min(rows.length,
        (page + 1) * PAGE_ROWS)} of ${rows.length}`)));
  }
  holder.replaceChildren(...parts);
}
function changed(key, value) {
  const text = JSON.stringify(value);
  if (shown[key] === text) return false;
  shown[key] = text;
  return true;
}
function drawJobs(document_) {
  document.getElementById("where").textContent = document_.checkpoint_dir;
  if (!changed("jobs", document_.jobs)) return;
  const rows = document_.jobs.map((job) => [
    el("a", {href: "#job=" + encodeURIComponent(job.job_name)}, job.job_name),
    el("span", {class: "status-" + job.status}, job.status),
    job.run_id || "", job.latest_checkpoint ?? "",
    job.last_epoch ? job.last_epoch.epoch : "", when(job.heartbeat), job.error || ""]);
  table("jobs", ["job", "status", "run", "last checkpoint", "epochs of the run", "heartbeat",
    "error"],
    rows);
}
function depths(vertices, edges) {
  const depth = {};
  for (const v of vertices) depth[v.id] = 0;
  for (let round = 0; round < vertices.length; round++) {
    for (const e of edges) depth[e.target] = Math.max(depth[e.target], depth[e.source] + 1);
  }
  return depth;
}
function parallelismText(report, v) {
  // "2", or each value and its runs where a restore changed it: "2 (run 1), 3 (run 2)"
  const layout = (report.layouts || []).slice(-1)[0];
  const perRun = layout ? layout.parallelism[String(v.id)] : null;
  const runsOf = new Map();
  for (const [run, p] of Object.entries(perRun || {})) {
    runsOf.set(p, [...(runsOf.get(p) || []), run]);
  }
  if (runsOf.size <= 1) return String(v.parallelism);
  return Array.from(runsOf, ([p, runs]) =>
    `${p} (${runs.length === 1 ? "run" : "runs"} ${runs.join(", ")})`).join(", ");
}
function busyPerSecond(report) {
  // each vertex's busy ms per second of its subtasks in the latest epoch (Flink's
  // busyTimeMsPerSecond): the time they processed, not waiting for input
  const latest = report.metrics.checkpoint_id;
  const epoch = report.epochs.find((e) => e.checkpoint_id === latest);
  const busy = {};
  if (!epoch || !epoch.seconds) return busy;
  for (const v of report.vertices) {
    const m = report.metrics.vertices[v.name];
    if (m && m.busyTimeMs !== undefined && m.busyTimeMs !== null) {
      busy[v.id] = Math.min(1000, m.busyTimeMs / v.parallelism / epoch.seconds);
    }
  }
  return busy;
}
function backpressuredPerSecond(report) {
  // each vertex's backpressured ms per second in the same epoch: how long its subtasks
  // waited for the vertices downstream to end the epoch (report/pressure.py)
  const latest = report.metrics.checkpoint_id;
  const epoch = report.epochs.find((e) => e.checkpoint_id === latest);
  const held = {};
  for (const v of report.vertices) {
    const ms = epoch && epoch.backpressured ? epoch.backpressured[v.name] : undefined;
    if (ms !== undefined) held[v.id] = ms;
  }
  return held;
}
function vertexColour(busy, held) {
  // as Flink's graph: busy red, backpressured dark grey, idle pale blue
  const mix = (from, to, ms) => {
    const t = Math.max(0, Math.min(1, ms / 1000));
    return from.map((a, i) => Math.round(a + (to[i] - a) * t));
  };
  const idle = [238, 244, 255];
  const grey = [140, 140, 140], red = [240, 128, 128];
  const [r, g, b] = held > busy ? mix(idle, grey, held) : mix(idle, red, busy);
  return `rgb(${r}, ${g}, ${b})`;
}
function drawGraph(report) {
  const busy = busyPerSecond(report), held = backpressuredPerSecond(report);
  if (!changed("graph", [report.vertices, report.edges, report.layouts, busy, held])) return;
  const depth = depths(report.vertices, report.edges);
  const rowsAt = {}, place = {};
  const W = 220, H = 96, GAP_X = 160, GAP_Y = 30;
  for (const v of report.vertices) {
    const d = depth[v.id], r = rowsAt[d] = (rowsAt[d] ?? -1) + 1;
    place[v.id] = {x: 10 + d * (W + GAP_X), y: 10 + r * (H + GAP_Y)};
  }
  const width = 20 + (Math.max(0, ...Object.values(depth)) + 1) * (W + GAP_X);
  const height = 20 + (Math.max(0, ...Object.values(rowsAt)) + 1) * (H + GAP_Y);
  const root = svg("svg", {id: "graph-svg", width, height});
  root.append(svg("defs", {}, svg("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 10,
    refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto"},
    svg("path", {d: "M0,0 L10,5 L0,10 z", fill: "#888"}))));
  for (const e of report.edges) {
    const a = place[e.source], b = place[e.target];
    if (!a || !b) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
    const label = e.partitioner + (e.side_output ? ` (${e.side_output})` : "");
    root.append(svg("g", {class: "edge", "data-source": e.source, "data-target": e.target},
      svg("path", {d: `M${x1},${y1} C${x1 + 40},${y1} ${x2 - 40},${y2} ${x2},${y2}`}),
      svg("title", {}, label),
      svg("text", {x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 6, "text-anchor": "middle"},
        label.length > 24 ? label.slice(0, 23) + "…" : label)));
  }
  for (const v of report.vertices) {
    const p = place[v.id];
    const ops = v.operators.join(" → ");
    const ms = busy[v.id], waited = held[v.id];
    const busyText = ms === undefined ? "busy: not measured" : `busy ${Math.round(ms)} ms/s`;
    const heldText = waited === undefined ? "" : `backpressured ${Math.round(waited)} ms/s`;
    const attrs = {class: "vertex", "data-vertex": v.id, "data-name": v.name};
    if (ms !== undefined) attrs["data-busy"] = Math.round(ms);
    if (waited !== undefined) attrs["data-backpressured"] = Math.round(waited);
    root.append(svg("g", attrs,
      svg("title", {}, `${v.name}: ${ops}`),
      svg("rect", {x: p.x, y: p.y, width: W, height: H, rx: 6,
        style: ms === undefined ? "" : `fill: ${vertexColour(ms, waited ?? 0)}`}),
      svg("text", {x: p.x + 8, y: p.y + 18},
        v.name.length > 30 ? v.name.slice(0, 29) + "…" : v.name),
      svg("text", {x: p.x + 8, y: p.y + 36, class: "muted"}, v.task_type),
      svg("text", {x: p.x + 8, y: p.y + 54}, `parallelism ${parallelismText(report, v)}`),
      svg("text", {x: p.x + 8, y: p.y + 72}, busyText),
      svg("text", {x: p.x + 8, y: p.y + 90}, heldText)));
  }
  // runs of another shape (an operator added or removed since): named under the graph
  const older = (report.layouts || []).slice(0, -1).map((layout) => el("p",
    {class: "muted shape"}, `${layout.runs.length === 1 ? "Run" : "Runs"} `
    + `${layout.runs.join(", ")} had another graph: `
    + layout.vertices.map((v) => v.name).join("; ")));
  document.getElementById("graph").replaceChildren(root, ...older);
}
const CHART_EPOCHS = 100;
const COLOURS = ["#4a6fa5", "#c0504d", "#9bbb59", "#8064a2", "#f79646", "#4bacc6"];
function lowest(value) {
  // a watermark as a number: itself, or the lowest of a per-subtask mapping or list;
  // null before the first one and at the end of the input (nothing to plot)
  if (typeof value === "number") return value >= 9.2e18 ? null : value;
  if (value && typeof value === "object") {
    const numbers = Object.values(value).map(lowest).filter((v) => v !== null);
    return numbers.length ? Math.min(...numbers) : null;
  }
  return null;
}
function chart(id, series, unit, empty) {
  // one line per series over the newest CHART_EPOCHS epochs: x the checkpoint id
  const names = Object.keys(series).filter((n) => series[n].length);
  const holder = document.getElementById(id);
  if (!names.length) {
    holder.replaceChildren(el("p", {class: "muted"}, empty || "nothing to draw yet"));
    return;
  }
  const points = names.flatMap((n) => series[n]);
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1), y1 = Math.max(...ys, 1);
  const W = 640, H = 160, L = 70, B = 20;
  const at = (p) => [L + (p[0] - x0) / (x1 - x0) * (W - L - 10),
    H - B - p[1] / y1 * (H - B - 26)].join(",");
  const root = svg("svg", {width: W, height: H + 18 * names.length});
  root.append(svg("line", {x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#999"}),
    svg("line", {x1: L, y1: 26, x2: W - 10, y2: 26, stroke: "#eee"}),
    svg("text", {x: 4, y: 16}, `${Math.round(y1).toLocaleString()} ${unit}`),
    svg("text", {x: 4, y: H - B}, "0"),
    svg("text", {x: L, y: H - 4}, `chk-${x0}`),
    svg("text", {x: W - 60, y: H - 4}, `chk-${x1}`));
  names.forEach((name, i) => {
    const colour = COLOURS[i % COLOURS.length];
    root.append(svg("polyline", {class: "series", "data-series": name, fill: "none",
      stroke: colour, "stroke-width": 2, points: series[name].map(at).join(" ")}));
    root.append(svg("text", {x: L, y: H + 14 + 18 * i, fill: colour}, name));
  });
  holder.replaceChildren(root);
}
function drawCharts(report) {
  const epochs = report.epochs.slice(-CHART_EPOCHS);
  if (!changed("charts", epochs)) return;
  const rates = {}, lags = {}, sizes = {};
  for (const v of report.vertices) { rates[v.name] = []; lags[v.name] = []; sizes[v.name] = []; }
  for (const e of epochs) {
    for (const v of report.vertices) {
      const out = (e.records_out || {})[v.name];
      if (out !== undefined && e.seconds > 0) {
        rates[v.name].push([e.checkpoint_id, out / e.seconds]);
      }
      const size = (e.state_bytes || {})[v.name];
      if (size !== undefined) sizes[v.name].push([e.checkpoint_id, size]);
      const mark = lowest((e.watermarks || {})[v.name]);
      if (mark !== null && e.time) {
        lags[v.name].push([e.checkpoint_id, Math.max(0, e.time * 1000 - mark)]);
      }
    }
  }
  chart("throughput", rates, "records out / s");
  const none = report.epochs.length && !report.epochs.some((e) =>
    Object.values(e.watermarks || {}).some((w) => lowest(w) !== null));
  chart("lag", lags, "ms behind", none ? "This job has no event time: no watermark to draw"
    : "nothing to draw yet");
  chart("state", sizes, "bytes of state");
}
function sparkLinks(spark) {
  // the epoch's Spark jobs and stages in Spark's UI (noted where the session had a UI)
  if (!spark || !spark.ui) return "";
  const link = (path, text) => el("a", {href: spark.ui + path, class: "spark"}, text);
  const parts = [];
  for (const id of spark.jobs) parts.push(link(`/jobs/job/?id=${id}`, `job ${id}`), " ");
  for (const id of spark.stages) {
    parts.push(link(`/stages/stage/?id=${id}&attempt=0`, `stage ${id}`), " ");
  }
  return el("span", {}, ...parts);
}
function failureText(f) {
  // "LifecycleError in chk-2 (keyed_process, run)": what failed, where and when
  const where = [f.operator, f.phase].filter((x) => x).join(", ");
  return f.error_type + (f.checkpoint_id !== null && f.checkpoint_id !== undefined
    ? ` in chk-${f.checkpoint_id}` : "") + (where ? ` (${where})` : "");
}
function drawMetrics(metrics) {
  // the latest epoch's metrics of each vertex, summed over its subtasks (a row a metric)
  const rows = [];
  for (const [vertex, values] of Object.entries(metrics.vertices || {})) {
    for (const name of Object.keys(values).sort()) {
      const value = values[name];
      rows.push([vertex, name, Number.isInteger(value) ? value : Number(value.toFixed(3))]);
    }
  }
  document.getElementById("metrics-of").textContent =
    metrics.checkpoint_id === null ? "" : `chk-${metrics.checkpoint_id}`;
  if (!rows.length) {
    document.getElementById("metrics").replaceChildren(
      el("p", {class: "muted"}, "no metrics recorded"));
    return;
  }
  table("metrics", ["vertex", "metric", "value"], rows);
}
function drawJob(report) {
  const live = report.live || {};
  document.getElementById("job-name").textContent = report.job_name;
  const status = document.getElementById("job-status");
  status.textContent = live.status || report.status || "";
  status.className = "status-" + (live.status || report.status);
  drawGraph(report);
  drawCharts(report);
  if (changed("checkpoints", report.epochs)) {
    const name = encodeURIComponent(report.job_name);
    const rows = report.epochs.slice().reverse().map((e) => [
      el("a", {href: `#job=${name}&chk=${e.checkpoint_id}`, class: "chk"}, e.checkpoint_id),
      e.run_id,
      e.kind + (e.final ? " (final)" : ""), e.seconds, e.checkpoint_bytes, e.rows,
      Object.entries(e.commits || {}).map(([sink, s]) => `${sink} ${Math.round(s * 1000)} ms`)
        .join(", "),
      when(e.time), sparkLinks(e.spark)]);
    table("checkpoints", ["checkpoint", "run", "kind", "seconds", "bytes", "rows",
      "committed", "time", "in Spark's UI"], rows);
  }
  if (changed("runs", report.runs)) {
    table("runs", ["run", "started", "restored from", "checkpoints", "failure"],
      report.runs.slice().reverse().map((r) => [r.run_id, when(r.started),
        r.restored_from ?? "", r.checkpoints.length,
        r.failure ? failureText(r.failure) : ""]));
  }
  if (changed("metrics", report.metrics)) drawMetrics(report.metrics);
  if (changed("failures", report.failures)) {
    table("failures", ["run", "time", "error", "task", "subtask", "operator", "phase",
      "checkpoint", "message"], report.failures.slice().reverse().map((f) => [f.run_id,
      when(f.time), f.error_type, f.task_name ?? "", f.subtask_index ?? "", f.operator ?? "",
      f.phase ?? "", f.checkpoint_id ?? "", f.cause || f.message]));
  }
}
function selected() {
  const match = location.hash.match(/^#job=([^&]*)/);
  return match ? decodeURIComponent(match[1]) : (SAVED ? SAVED.job : null);
}
function selectedCheckpoint() {
  const match = location.hash.match(/&chk=([0-9]+)$/);
  return match ? Number(match[1]) : null;
}
const PHASE_COLOURS = {setup: "#bbb", initialize_state: "#9bbb59", open: "#4bacc6",
  run: "#4a6fa5", finish: "#8064a2", snapshot: "#f79646", close: "#777"};
let timelineZoom = 1;
function drawTimeline(entry) {
  const spans = [];
  entry.subtasks.forEach((sub, row) => {
    for (const [phase, times] of Object.entries(sub.lifecycle_phases || {})) {
      if (Array.isArray(times) && times.length === 2) spans.push([row, phase, times[0], times[1]]);
    }
  });
  const holder = document.getElementById("timeline");
  if (!spans.length) {
    holder.replaceChildren(el("p", {class: "muted"}, "no phase times logged"));
    return;
  }
  const t0 = Math.min(...spans.map((s) => s[2])), t1 = Math.max(...spans.map((s) => s[3]));
  const L = 200, W = (900 - L) * timelineZoom, ROW = 22;
  const x = (t) => L + (t - t0) / Math.max(t1 - t0, 1e-6) * W;
  const root = svg("svg", {width: L + W + 20, height: 30 + ROW * entry.subtasks.length});
  entry.subtasks.forEach((sub, row) => {
    const g = svg("g", {class: "subtask", "data-task": sub.task_name,
      "data-subtask": sub.subtask_index});
    g.append(svg("text", {x: 4, y: 16 + ROW * row}, `${sub.task_name} #${sub.subtask_index}`));
    for (const [r, phase, start, end] of spans.filter((s) => s[0] === row)) {
      g.append(svg("rect", {class: "phase", "data-phase": phase, x: x(start), y: 4 + ROW * r,
        width: Math.max(1, x(end) - x(start)), height: ROW - 6,
        fill: PHASE_COLOURS[phase] || "#ccc"}, svg("title", {},
          `${phase}: ${((end - start) * 1000).toFixed(1)} ms`)));
    }
    root.append(g);
  });
  root.append(svg("text", {x: L, y: 24 + ROW * entry.subtasks.length},
    `0 - ${((t1 - t0) * 1000).toFixed(0)} ms`));
  holder.replaceChildren(root);
}
function drawCheckpoint(entry) {
  document.getElementById("checkpoint-id").textContent = entry.checkpoint_id;
  const starts = entry.subtasks.flatMap((s) => Object.values(s.lifecycle_phases || {})
    .map((t) => t[0]));
  const t0 = starts.length ? Math.min(...starts) : null;
  const acked = (s) => {
    const snap = (s.lifecycle_phases || {}).snapshot;
    return snap && t0 !== null ? ((snap[1] - t0) * 1000).toFixed(1) : "";
  };
  table("checkpoint-detail", ["task", "subtask", "attempt", "records in", "records out",
    "bytes", "seconds", "acknowledged (ms after the first start)"],
    entry.subtasks.map((s) => [s.task_name, s.subtask_index, s.attempt_id, s.records_in,
      s.records_out, s.size_bytes, Number(s.duration_seconds.toFixed(3)), acked(s)]));
  drawTimeline(entry);
}
async function refreshCheckpoint(name) {
  const id = selectedCheckpoint();
  document.getElementById("checkpoint").hidden = id === null;
  if (id === null || !changed("checkpoint-shown", [name, id, timelineZoom])) return;
  const answer = await load(`api/jobs/${encodeURIComponent(name)}/checkpoints/${id}`);
  if (answer.ok) drawCheckpoint(answer.body);
  else document.getElementById("checkpoint-detail").textContent = answer.body.error;
}
async function send(action) {
  const name = selected();
  const drain = action === "drain";
  const path = drain ? "stop?drain=1" : action;
  const what = {savepoint: "take a savepoint of", stop: "stop", drain: "drain and stop"};
  if (!confirm(`${what[action]} job ${name}?`)) return;
  const answer = document.getElementById("answer");
  answer.textContent = "waiting for the job to answer…";
  const response = await fetch(`api/jobs/${encodeURIComponent(name)}/${path}`,
    {method: "POST", headers: {"X-Flintlock-Control": "1"}});
  const body = await response.json();
  answer.textContent = response.ok ? `savepoint: ${body.savepoint}` : `refused: ${body.error}`;
}
async function refresh() {
  try {
    const jobs = (await load("api/jobs")).body;
    drawJobs(jobs);
    document.getElementById("controls").hidden = !jobs.control;
    const name = selected();
    document.getElementById("job").hidden = name === null;
    if (name !== null) {
      const answer = await load("api/jobs/" + encodeURIComponent(name));
      if (answer.ok) drawJob(answer.body);
      else document.getElementById("job-status").textContent = answer.body.error;
      await refreshCheckpoint(name);
    }
    document.getElementById("updated").textContent = SAVED
      ? `saved ${when(SAVED.saved)}: a copy of the job folder, nothing fetched`
      : `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    document.getElementById("updated").textContent = "unreachable: " + error;
  }
}
window.addEventListener("hashchange", () => {
  for (const k in shown) shown[k] = null;
  refresh();
});
document.getElementById("zoom").onchange = (event) => {
  timelineZoom = Number(event.target.value);
  refresh();
};
for (const action of ["savepoint", "stop", "drain"]) {
  document.getElementById("do-" + action).onclick = () => send(action);
}
refresh();
if (!SAVED) setInterval(refresh, 1000);  // a saved page has all it shows
""".replace("__PAGE_ROWS__", str(PAGE_ROWS))

PAGE = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>flintlock</title>
<style>{STYLE}</style></head>
<body>
<h1>flintlock <span class="muted" id="where"></span></h1>
<div class="muted" id="updated"></div>
<h2>Jobs</h2><div id="jobs"></div>
<section id="job" hidden>
<h2>Job <span id="job-name"></span>: <span id="job-status"></span></h2>
<div class="controls" id="controls" hidden>
<button id="do-savepoint">Take a savepoint</button><button id="do-stop">Stop</button>
<button id="do-drain">Stop with drain</button> <span id="answer"></span></div>
<h2>Graph</h2><div id="graph"></div>
<h2>Records out per second, each epoch</h2><div id="throughput"></div>
<h2>Watermark lag (how far event time is behind the epoch's end)</h2><div id="lag"></div>
<h2>State size per vertex, each epoch</h2><div id="state"></div>
<h2>Checkpoints</h2><div id="checkpoints"></div>
<section id="checkpoint" hidden>
<h2>Checkpoint <span id="checkpoint-id"></span>: its subtasks</h2>
<div id="checkpoint-detail"></div>
<h2>Lifecycle timeline of each subtask <select id="zoom"><option value="1">1x</option>
<option value="2">2x</option><option value="4">4x</option><option value="8">8x</option>
</select></h2><div id="timeline" style="overflow-x: auto"></div>
</section>
<h2>Runs</h2><div id="runs"></div>
<h2>Failures</h2><div id="failures"></div>
<h2>Metrics <span id="metrics-of" class="muted"></span></h2><div id="metrics"></div>
</section>
<script>{SCRIPT}</script>
</body></html>
"""
