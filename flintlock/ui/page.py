"""The live page: one HTML document with its style and script inline (it fetches nothing
but the app's JSON), polling ``/api/jobs`` and the shown job's ``/api/jobs/{name}`` each
second and redrawing only what changed: the jobs list, the job graph and charts
(``drawings.py``), the checkpoints (newest first, a page of ``PAGE_ROWS`` at a time; a
click shows one's subtasks and timeline), the runs, the failures and the metrics. Saved
with its documents (``saved.py``), the same page draws them once and fetches nothing."""

from __future__ import annotations

from flintlock.ui.drawings import GRAPH_AND_CHARTS

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

SCRIPT = (
    """
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
"""
    + GRAPH_AND_CHARTS
    + """
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
"""
).replace("__PAGE_ROWS__", str(PAGE_ROWS))

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
