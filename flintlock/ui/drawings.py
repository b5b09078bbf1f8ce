"""The live page's drawings, part of its one inline script (``page.py``): the job graph
(vertices with their operators and each run's parallelism, edges with their partitioners,
each vertex coloured by its busy and backpressured ms per second) and the charts over the
newest epochs (records out per second, watermark lag, state size per vertex)."""

GRAPH_AND_CHARTS = """
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
function latestEpoch(report) {
  // the epoch whose metrics the report carries (the graph's figures are that epoch's)
  return report.epochs.find((e) => e.checkpoint_id === report.metrics.checkpoint_id);
}
function busyPerSecond(report) {
  // each vertex's busy ms per second of its subtasks in the latest epoch (Flink's
  // busyTimeMsPerSecond): the time they processed, not waiting for input
  const epoch = latestEpoch(report);
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
  const epoch = latestEpoch(report);
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
"""
