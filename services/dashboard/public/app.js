// HADIS live dashboard: polls /api/state once a second and draws with inline SVG. No build step.
"use strict";

const $ = (sel) => document.querySelector(sel);
// Text from the services (and from anybody who can publish on their subjects): always escaped;
// a value that is not a string, number or flag shows as nothing rather than throwing.
const esc = (s) =>
  (["string", "number", "boolean"].includes(typeof s) ? String(s) : "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c],
  );
const fmtMs = (ms) =>
  typeof ms !== "number" || !Number.isFinite(ms)
    ? "–"
    : ms >= 10_000
      ? `${(ms / 1000).toFixed(1)} s`
      : ms >= 1000
        ? `${(ms / 1000).toFixed(2)} s`
        : ms >= 10
          ? `${ms.toFixed(0)} ms`
          : `${ms.toFixed(1)} ms`;
const fmtNum = (x, d = 1) => (typeof x !== "number" || Number.isNaN(x) ? "–" : x.toFixed(d));
const pct = (x, d = 1) => (x == null ? "–" : `${(x * 100).toFixed(d)}%`);
const PALETTE = ["#3ecf8e", "#ffb547", "#ff8fa3", "#5fd4e6", "#c3e88d", "#f78c6c"];
const modelColors = new Map();
function modelColor(model) {
  if (!model) return "#5a6785";
  // The pair in force keeps the stage colours: light blue, heavy violet.
  if (lastState?.plan?.pair.light === model) return "#6ea8ff";
  if (lastState?.plan?.pair.heavy === model) return "#b48cff";
  if (!modelColors.has(model)) modelColors.set(model, PALETTE[modelColors.size % PALETTE.length]);
  return modelColors.get(model);
}
const STAGES = [
  ["route", "route"],
  ["queue", "queue wait"],
  ["light", "light generation"],
  ["judge", "judge"],
  ["heavy", "heavy generation"],
  ["reply", "reply"],
];

/** The request shown in the trace panel: its trace, its root span (a caller's trace may hold several requests). */
let selectedTrace = null;
let selectedRoot = null;
let selectedSpan = null;
/** Spans of the trace on screen (it is fetched again while stage spans still arrive). */
let shownSpans = -1;
/** A request or trace the address names that the dashboard did not hold yet. */
let pendingAddress = null;
let lastState = null;

/**
 * The stage class of a span: what the waterfall colours it as. `stage` is the light or heavy
 * stage the span serves (from its own `hadis.stage` or an ancestor's); without one an `execute`
 * span is guessed from the pair in force.
 */
function stageOf(span, stage, plan) {
  const n = span.n;
  if (n === "route") return "route";
  if (n === "reply") return "reply";
  if (n === "judge") return "judge";
  if (n.startsWith("queue ")) return "queue";
  if (n.startsWith("light ")) return "light";
  if (n.startsWith("heavy ")) return "heavy";
  if (n.startsWith("execute ")) {
    if (stage === "light" || stage === "heavy") return stage;
    return plan && plan.pair.heavy === n.slice(8) ? "heavy" : "light";
  }
  return "other";
}

/** The model a worker shows: the one it runs, or the one it is loading (the plan's for it). */
function workerModel(w, plan) {
  // A worker loading its model holds none yet; one whose load failed holds none: both are the plan's (or the failed model's).
  if (w.model) return w.model;
  if (w.state === "loading") return plan?.assignment?.[w.workerId] ?? null;
  if (w.state === "failed") return w.failedModel ?? plan?.assignment?.[w.workerId] ?? null;
  return null;
}

function lineChart(el, series, { yMax, fmt = (v) => v.toFixed(0), right } = {}) {
  const W = 600,
    H = 180,
    L = 44,
    R = right ? 40 : 10,
    T = 10,
    B = 22;
  const n = Math.max(...series.map((s) => s.values.length), 2);
  const max = Math.max(yMax ?? 0, ...series.filter((s) => !s.right).flatMap((s) => s.values.filter((v) => v != null)), 1e-9);
  const top = niceMax(max);
  const rmax = right ? niceMax(Math.max(...series.filter((s) => s.right).flatMap((s) => s.values), 1)) : 1;
  const x = (i) => L + (i / (n - 1)) * (W - L - R);
  const y = (v, r) => T + (1 - v / (r ? rmax : top)) * (H - T - B);
  let svg = `<svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none">`;
  for (let k = 0; k <= 4; k++) {
    const v = (top * k) / 4;
    svg += `<line class="grid" x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}"/><text class="axis" x="${L - 6}" y="${y(v) + 3}" text-anchor="end">${fmt(v)}</text>`;
    if (right) svg += `<text class="axis" x="${W - R + 6}" y="${y((rmax * k) / 4, true) + 3}">${((rmax * k) / 4).toFixed(0)}</text>`;
  }
  const ticks = [
    [0, "−5 min"],
    [0.25, ""],
    [0.5, "−2.5 min"],
    [0.75, ""],
    [1, "now"],
  ];
  for (const [f, label] of ticks)
    if (label)
      svg += `<text class="axis" x="${x(f * (n - 1))}" y="${H - 6}" text-anchor="${f === 0 ? "start" : f === 1 ? "end" : "middle"}">${label}</text>`;
  for (const s of series) {
    const pts = s.values.map((v, i) => (v == null ? null : `${x(i).toFixed(1)},${y(v, s.right).toFixed(1)}`));
    const d = pts.reduce((acc, p, i) => (p ? acc + (acc && pts[i - 1] ? "L" : "M") + p : acc), "");
    if (s.fill) {
      // Each run of values between gaps (seconds with nothing to show) is filled down to the axis on its own.
      const base = y(0, s.right).toFixed(1);
      for (let i = 0; i < pts.length; i++) {
        if (!pts[i] || pts[i - 1]) continue;
        let j = i;
        while (pts[j + 1]) j++;
        svg += `<path d="M${x(i).toFixed(1)},${base}L${pts.slice(i, j + 1).join("L")}L${x(j).toFixed(1)},${base}Z" fill="${s.color}" opacity="0.16"/>`;
      }
    }
    svg += `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="${s.width ?? 1.8}" stroke-linejoin="round" ${s.dash ? 'stroke-dasharray="3 3"' : ""}/>`;
  }
  el.innerHTML = svg + "</svg>";
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function smooth(values, k = 3) {
  return values.map((_, i) => {
    const w = values.slice(Math.max(0, i - k + 1), i + 1);
    return w.reduce((a, b) => a + b, 0) / w.length;
  });
}

function renderKpis(s) {
  const sm = s.summary;
  const serving = s.workers.filter((w) => w.state === "serving").length;
  const swapping = s.workers.filter((w) => w.state === "loading" || w.state === "unloading").length;
  const v = sm.sloViolationRatio;
  const kpis = [
    ["Demand (10 s)", `${fmtNum(sm.demandQps)}<small>req/s</small>`, ""],
    ["Served (10 s)", `${fmtNum(sm.servedQps)}<small>req/s</small>`, ""],
    ["SLO violations (1 min)", v == null ? "–" : pct(v), v == null ? "" : v > 0.05 ? "bad" : v > 0.01 ? "warn" : "good"],
    ["Latency p50 / p99 (traced)", `${fmtMs(sm.p50Ms)}<small>/ ${fmtMs(sm.p99Ms)}</small>`, ""],
    ["Workers serving", `${serving}<small>/ ${s.workers.length}</small>`, serving < s.workers.length ? "warn" : "good"],
    ["Swaps in progress", `${swapping}`, swapping ? "warn" : ""],
  ];
  $("#kpis").innerHTML = kpis
    .map(([l, val, cls]) => `<div class="kpi ${cls}"><div class="label">${l}</div><div class="value">${val}</div></div>`)
    .join("");
}

function renderCharts(s) {
  const demand = smooth(
    s.series.map((b) => b.arrivals),
    3,
  );
  const served = smooth(
    s.series.map((b) => b.served),
    3,
  );
  lineChart(
    $("#chart-qps"),
    [
      { values: demand, color: "var(--warn)", fill: true },
      { values: served, color: "var(--accent)" },
    ],
    { fmt: (v) => (v >= 100 ? v.toFixed(0) : v.toFixed(1)) },
  );
  const ratio = s.series.map((b) => (b.answered ? b.violations / b.answered : null));
  lineChart(
    $("#chart-slo"),
    [
      { values: s.series.map((b) => b.answered), color: "var(--muted)", right: true, width: 1, dash: true },
      { values: ratio, color: "var(--bad)", fill: true },
    ],
    { yMax: 0.05, fmt: (v) => `${(v * 100).toFixed(v < 0.1 ? 1 : 0)}%`, right: true },
  );
}

function renderPlan(s) {
  const p = s.plan;
  if (!p) return;
  const live = {};
  for (const w of s.workers) {
    const model = workerModel(w, p);
    // Loading or unloading is a swap in progress; a failed or draining worker is neither serving nor swapping.
    const kind =
      w.state === "serving"
        ? "serving"
        : w.state === "loading" || w.state === "unloading"
          ? "swapping"
          : w.state === "failed" || w.state === "draining" || w.state === "lost"
            ? "down"
            : null;
    if (model && kind) (live[model] ??= { serving: 0, swapping: 0, down: 0 })[kind]++;
  }
  const models = Object.entries(p.models).sort((a, b) => b[1].workers - a[1].workers);
  $("#plan").innerHTML = `
    <h2>Plan in force <span class="hint">epoch ${p.epoch} · policy ${esc(p.policy)}${p.degraded ? ` · degraded step ${p.degraded}` : ""}</span></h2>
    <div class="pair"><span class="light">${esc(p.pair.light)}</span><span class="arrow">→</span><span class="heavy">${esc(p.pair.heavy)}</span></div>
    <div class="facts">
      <div class="fact"><div class="k">router share (heavy)</div><div class="v">${pct(p.routerThreshold)}</div></div>
      <div class="fact"><div class="k">discriminator share</div><div class="v">${pct(p.discThreshold)}</div></div>
      <div class="fact"><div class="k">expected heavy share</div><div class="v">${pct(p.heavyShare)}</div></div>
      <div class="fact"><div class="k">SLO</div><div class="v">${fmtMs(p.sloMs)}</div></div>
      <div class="fact"><div class="k">expected FID</div><div class="v">${p.expectedFid == null ? "–" : p.expectedFid.toFixed(2)}</div></div>
      <div class="fact"><div class="k">time scale</div><div class="v">${p.timeScale}</div></div>
    </div>
    <table><thead><tr><th>model</th><th class="num">workers (plan)</th><th class="num">batch</th><th class="num">serving now</th><th class="num">swapping</th><th class="num">failed, draining or lost</th></tr></thead><tbody>
    ${models.map(([m, a]) => `<tr><td><span class="model-chip" style="background:${modelColor(m)}"></span>${esc(m)}</td><td class="num">${a.workers}</td><td class="num">${a.batchSize}</td><td class="num">${live[m]?.serving ?? 0}</td><td class="num">${live[m]?.swapping ?? 0}</td><td class="num">${live[m]?.down ?? 0}</td></tr>`).join("")}
    </tbody></table>
    <div class="reason">${esc(p.reason)}</div>`;
}

function renderWorkers(s) {
  $("#workers-hint").textContent = `${s.workers.length} heard from`;
  $("#workers").innerHTML =
    s.workers
      .map((w) => {
        const model = workerModel(w, s.plan);
        return `
    <div class="worker" style="border-left-color:${modelColor(model)}" title="${esc(w.workerId)}${w.state === "lost" ? ` — no heartbeat for over 3 s (last ${esc(w.lastState)}): the resource manager plans without it` : ""}${w.lastError ? " — " + esc(w.lastError) : ""}">
      <div class="id">${esc(w.workerId.split("-").slice(-2).join("-"))}</div>
      <div class="model">${esc(model ?? "—")}${w.state === "loading" && !w.model && model ? " <small>(loading)</small>" : ""}</div>
      <div><span class="badge ${esc(w.state)}">${esc(w.state)}</span></div>
      <div class="meta">batch ${w.batchSize} · served ${w.servedTotal}${w.swapsTotal ? ` · swaps ${w.swapsTotal}` : ""}</div>
    </div>`;
      })
      .join("") || `<div class="empty">no heartbeats yet</div>`;
}

function routeClass(r) {
  if (r.outcome !== "ok") return "err";
  return r.route === "light" ? "light" : r.route === "heavy" ? "heavy" : "esc";
}

function renderRequests(s) {
  const rows = s.recent.map((r) => {
    const total = Math.max(r.totalMs, 0.001);
    const bars = r.stages
      .filter((st) => st.n === "route" || st.n === "reply" || st.n.startsWith("queue ") || st.n.startsWith("execute ") || st.n === "judge")
      .map(
        (st) =>
          `<span class="st-${stageOf(st, st.stage, s.plan)}" style="left:${((st.o / total) * 100).toFixed(2)}%;width:${Math.max(0.4, (st.d / total) * 100).toFixed(2)}%"></span>`,
      )
      .join("");
    const t = new Date(r.startMs).toLocaleTimeString([], { hour12: false });
    const slo = r.sloMet == null ? "" : r.sloMet ? `<span class="ok">met</span>` : `<span class="miss">missed</span>`;
    return `<tr data-trace="${esc(r.traceId)}" data-root="${esc(r.spanId)}"${r.requestId ? ` data-request="${esc(r.requestId)}"` : ""} class="${r.traceId === selectedTrace && r.spanId === selectedRoot ? "selected" : ""}">
      <td>${t}</td><td class="tid">${esc((r.requestId ?? r.traceId).slice(-10))}</td>
      <td class="route ${routeClass(r)}">${esc(r.outcome === "ok" ? r.route : r.outcome)}${r.fallback ? ` <span class="fallback" title="not the image the cascade meant: see the reply's fallback in the README">(${esc(r.fallback)})</span>` : ""}</td>
      <td class="num">${fmtMs(r.totalMs)}</td><td>${slo}</td><td class="wf"><div class="mini">${bars}</div></td></tr>`;
  });
  $("#requests tbody").innerHTML = rows.join("") || `<tr><td colspan="6" class="empty">no requests yet</td></tr>`;
}

/** Shows a request's trace; a later click wins over a fetch still on its way. */
async function showTrace(traceId, rootId) {
  const fresh = selectedTrace !== traceId || selectedRoot !== rootId;
  selectedTrace = traceId;
  selectedRoot = rootId;
  if (fresh) shownSpans = -1;
  document
    .querySelectorAll("#requests tbody tr")
    .forEach((tr) => tr.classList.toggle("selected", tr.dataset.trace === traceId && tr.dataset.root === rootId));
  const res = await fetch(`/api/trace/${encodeURIComponent(traceId)}`);
  if (selectedTrace !== traceId || selectedRoot !== rootId) return;
  if (!res.ok) {
    $("#trace").innerHTML =
      `<h2>Trace <span class="tid">${esc(traceId)}</span></h2><div class="empty">this trace is no longer held (the dashboard keeps the latest 2,000 traces)</div>`;
    shownSpans = 0;
    return;
  }
  const { spans } = await res.json();
  if (selectedTrace !== traceId || selectedRoot !== rootId || spans.length === shownSpans) return;
  shownSpans = spans.length;
  drawTrace(traceId, rootId, spans);
}

function drawTrace(traceId, rootId, spans) {
  const byId = new Map(spans.map((s) => [s.s, s]));
  const children = new Map();
  const roots = [];
  for (const s of spans) {
    if (s.p && byId.has(s.p)) (children.get(s.p) ?? children.set(s.p, []).get(s.p)).push(s);
    else roots.push(s);
  }
  // Depth first, each span once; a span's stage is its own `hadis.stage` or its parent's.
  const ordered = [];
  const seen = new Set();
  const walk = (s, depth, inherited) => {
    if (seen.has(s.s)) return;
    seen.add(s.s);
    const own = s.a?.["hadis.stage"];
    const stage = own === "light" || own === "heavy" ? own : inherited;
    ordered.push({ s, depth, stage });
    for (const c of (children.get(s.s) ?? []).sort((a, b) => a.st - b.st)) walk(c, depth + 1, stage);
  };
  roots.sort((a, b) => a.st - b.st).forEach((r) => walk(r, 0, undefined));
  const t0 = Math.min(...spans.map((s) => s.st));
  const t1 = Math.max(...spans.map((s) => s.st + s.d));
  const total = Math.max(t1 - t0, 0.001);
  const root = spans.find((s) => s.s === rootId) ?? spans.find((s) => s.n === "hadis.generate");
  const a = root?.a ?? {};
  const services = [...new Set(spans.map((s) => s.sv))];
  const head = root
    ? `
    <div class="head">
      <span>route <b class="route ${a["hadis.outcome"] === "ok" ? (a["hadis.route"] === "light" ? "light" : a["hadis.route"] === "heavy" ? "heavy" : "esc") : "err"}">${esc(a["hadis.route"] ?? a["hadis.outcome"])}</b></span>
      ${a["hadis.fallback"] ? `<span>fallback <b class="miss">${esc(a["hadis.fallback"])}</b></span>` : ""}
      <span>total <b>${fmtMs(root.d)}</b></span>
      ${typeof a["hadis.slo_met"] === "boolean" ? `<span>SLO <b class="${a["hadis.slo_met"] ? "ok" : "miss"}">${a["hadis.slo_met"] ? "met" : "missed"}</b> (${fmtMs(a["hadis.slo_ms"])})</span>` : ""}
      <span>plan epoch <b>${esc(a["hadis.plan_epoch"])}</b></span>
      ${a["hadis.disc.score"] != null ? `<span>score <b>${Number(a["hadis.disc.score"]).toPrecision(3)}</b> vs <b>${Number(a["hadis.disc.threshold"]).toPrecision(3)}</b></span>` : ""}
      <span>deadline <b>${fmtMs(a["hadis.deadline_ms"])}</b></span>
    </div>`
    : "";
  const rows = ordered
    .map(({ s, depth, stage: served }) => {
      const stage = stageOf(s, served, lastState?.plan);
      return `<div class="wfrow ${s.s === selectedSpan ? "sel" : ""}" data-span="${esc(s.s)}">
      <div class="name" style="padding-left:${depth * 14}px">${esc(s.n)}<span class="svc">${esc(s.sv.replace(/^hadis-/, ""))}</span></div>
      <div class="track"><div class="bar st-${stage} ${s.e ? "err" : ""}" style="left:${(((s.st - t0) / total) * 100).toFixed(2)}%;width:${Math.max(0.3, (s.d / total) * 100).toFixed(2)}%"></div></div>
      <div class="dur">${fmtMs(s.d)}</div></div>`;
    })
    .join("");
  const sel = spans.find((s) => s.s === selectedSpan) ?? root;
  const attrs = sel
    ? Object.entries({ service: sel.sv, span: sel.n, "span id": sel.s, ...(sel.e ? { error: sel.e } : {}), ...sel.a })
        .map(([k, v]) => `<div><span class="k">${esc(k)}</span> = ${esc(Array.isArray(v) ? v.join(", ") : v)}</div>`)
        .join("")
    : "";
  $("#trace").innerHTML =
    `<h2>Trace <span class="tid">${esc(traceId)}</span> <span class="hint">${spans.length} spans · ${esc(services.map((x) => x.replace(/^hadis-/, "")).join(", "))}</span></h2>${head}<div class="waterfall">${rows}</div><div class="attrs">${attrs}</div>`;
  $("#trace")
    .querySelectorAll(".wfrow")
    .forEach((row) =>
      row.addEventListener("click", () => {
        selectedSpan = row.dataset.span;
        drawTrace(traceId, rootId, spans);
      }),
    );
}

async function tick() {
  try {
    const res = await fetch("/api/state?recent=30");
    const s = await res.json();
    lastState = s;
    $("#status").className = "status";
    $("#status").innerHTML =
      `<span class="dot"></span>live · ${new Date(s.now).toLocaleTimeString([], { hour12: false })}${s.tracing ? "" : " · tracing off"}`;
    renderKpis(s);
    renderCharts(s);
    renderPlan(s);
    renderWorkers(s);
    renderRequests(s);
    if (pendingAddress) void showAddressed();
    else if (!selectedTrace && s.recent.length) void showTrace(s.recent[0].traceId, s.recent[0].spanId);
    // Stage spans reach the dashboard after their root at times: the trace on screen follows.
    else if (selectedTrace) void showTrace(selectedTrace, selectedRoot);
  } catch {
    $("#status").className = "status down";
    $("#status").innerHTML = `<span class="dot"></span>disconnected`;
  }
}

/** One poll at a time: the next starts a second after this one has drawn (an older answer never overwrites a newer one). */
async function poll() {
  await tick();
  setTimeout(poll, 1000);
}

$("#stage-legend").innerHTML = STAGES.map(([k, label]) => `<span><i class="st-${k}"></i>${label}</span>`).join("");
$("#requests tbody").addEventListener("click", (e) => {
  const tr = e.target.closest("tr[data-trace]");
  if (tr) {
    selectedSpan = null;
    shownSpans = -1; // drawn again even when it is the request on screen
    // The address names the request shown (a link to share; the reply's request id opens it).
    pendingAddress = null;
    history.replaceState(
      null,
      "",
      tr.dataset.request ? `#request=${encodeURIComponent(tr.dataset.request)}` : `#trace=${encodeURIComponent(tr.dataset.trace)}`,
    );
    void showTrace(tr.dataset.trace, tr.dataset.root);
  }
});

/**
 * `#request=<request id>` (a reply's `requestId`) or `#trace=<trace id>`: shows that request's
 * trace. One not listed yet (its reply can come before its spans) is looked up again each poll.
 */
async function showAddressed() {
  const m = /^#(request|trace)=(.+)$/.exec(location.hash);
  if (!m) return;
  let asked = m[2];
  try {
    asked = decodeURIComponent(asked);
  } catch {
    // a malformed escape: looked up as written
  }
  const res = await fetch(`/api/trace/${encodeURIComponent(asked)}`);
  if (!res.ok) {
    pendingAddress = asked;
    selectedTrace = asked; // not replaced by the latest request meanwhile
    selectedRoot = null;
    $("#trace").innerHTML =
      `<h2>Trace</h2><div class="empty">no request or trace <span class="tid">${esc(asked)}</span> is held yet (the dashboard keeps the latest 2,000 traces and lists the latest 300 requests)</div>`;
    return;
  }
  pendingAddress = null;
  const { traceId, rootSpanId } = await res.json();
  selectedSpan = null;
  shownSpans = -1;
  await showTrace(traceId, rootSpanId ?? null);
}
window.addEventListener("hashchange", () => void showAddressed());
void showAddressed().finally(() => void poll());
