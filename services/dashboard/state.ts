/**
 * What the dashboard knows, built from what the services publish: finished spans of the traces
 * marked for it (grouped into traces; a `hadis.generate` root span is one request), router load
 * reports (demand, served, SLO outcomes: every request, where the traces are a sample), worker
 * heartbeats and the plan. Pure: time is passed in.
 */
import { WORKER_SILENT_AFTER_MS, type Plan, type RouterStats, type WorkerHeartbeat } from "../../contracts/messages.ts";
import { REQUEST_SPAN, type Attributes, type SpanRecord } from "../telemetry/tracing.ts";
import type { AttributeValue } from "@opentelemetry/api";

/** One second of traffic. */
export interface SecondBucket {
  /** Epoch second. */
  t: number;
  /** Requests that arrived at the routers (their load reports). */
  arrivals: number;
  /** Requests answered with an image. */
  served: number;
  /** Accepted requests that failed or missed the SLO. */
  violations: number;
  /** Answered requests (served or failed; refused bad input excluded). */
  answered: number;
}

/** One request as the dashboard lists it. */
export interface RequestSummary {
  traceId: string;
  /** The request's root span. */
  spanId: string;
  requestId?: string;
  startMs: number;
  totalMs: number;
  route?: string;
  outcome: string;
  sloMet?: boolean;
  sloMs?: number;
  planEpoch?: number;
  models?: string[];
  score?: number;
  threshold?: number;
  /** Why the image is not the one the cascade meant (the reply's `fallback`), when it is not. */
  fallback?: string;
  /**
   * The stage spans of the request, relative to its start: name, service, offset ms, duration ms,
   * error, and the stage (light or heavy) the span serves, from its own `hadis.stage` or an ancestor's.
   */
  stages: { n: string; sv: string; o: number; d: number; e?: boolean; stage?: string }[];
}

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
const finite = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);

/** Bounds of a span record kept: the sink subject is open to any publisher, and a record is kept for minutes. */
const RECORD_LIMITS = { name: 256, service: 128, error: 1_024, attributes: 64, key: 128, value: 1_024, arrayItems: 16, links: 32 };

const cut = (x: string, n: number) => (x.length <= n ? x : x.slice(0, n) + "…");

/** An attribute value as kept: a string (cut), a finite number, a flag, or a short array of one of those; anything else (bytes, BigInt, objects) is dropped. */
function attributeValue(v: unknown): AttributeValue | undefined {
  if (typeof v === "string") return cut(v, RECORD_LIMITS.value);
  if (finite(v) || typeof v === "boolean") return v;
  if (!Array.isArray(v)) return undefined;
  const head = v.slice(0, RECORD_LIMITS.arrayItems);
  if (typeof head[0] === "number") return head.filter(finite);
  if (typeof head[0] === "boolean") return head.filter((x): x is boolean => typeof x === "boolean");
  return head.filter((x): x is string => typeof x === "string").map((x) => cut(x, RECORD_LIMITS.value));
}

/** A link as the sinks write it: trace and span id. */
const isLink = (l: unknown) =>
  typeof l === "object" &&
  l !== null &&
  typeof (l as { t?: unknown }).t === "string" &&
  TRACE_ID.test((l as { t: string }).t) &&
  typeof (l as { s?: unknown }).s === "string" &&
  SPAN_ID.test((l as { s: string }).s);

/**
 * A span record as the services' sinks write it, copied within `RECORD_LIMITS`, or null when it is
 * not one: the sink subject is open to any publisher, and a record with odd ids (a span its own
 * parent) or non-numeric times must not reach the trace walks or the page, nor one of megabytes
 * the dashboard's memory (the copy holds no view into the message's buffer either).
 */
export function spanRecordOf(x: unknown): SpanRecord | null {
  if (typeof x !== "object" || x === null) return null;
  const r = x as Record<string, unknown>;
  if (typeof r.t !== "string" || !TRACE_ID.test(r.t) || typeof r.s !== "string" || !SPAN_ID.test(r.s)) return null;
  if (r.p !== undefined && (typeof r.p !== "string" || !SPAN_ID.test(r.p) || r.p === r.s)) return null;
  if (typeof r.n !== "string" || typeof r.sv !== "string" || !finite(r.k) || !finite(r.st) || !finite(r.d) || r.d < 0) return null;
  if (typeof r.a !== "object" || r.a === null || Array.isArray(r.a)) return null;
  if (r.e !== undefined && typeof r.e !== "string") return null;
  if (r.l !== undefined && !(Array.isArray(r.l) && r.l.every(isLink))) return null;
  const a: Attributes = {};
  let kept = 0;
  for (const key of Object.keys(r.a)) {
    if (kept >= RECORD_LIMITS.attributes) break;
    const v = key.length <= RECORD_LIMITS.key ? attributeValue((r.a as Record<string, unknown>)[key]) : undefined;
    if (v === undefined) continue;
    a[key] = v;
    kept++;
  }
  return {
    t: r.t,
    s: r.s,
    ...(r.p !== undefined ? { p: r.p as string } : {}),
    n: cut(r.n, RECORD_LIMITS.name),
    sv: cut(r.sv, RECORD_LIMITS.service),
    k: r.k,
    st: r.st,
    d: r.d,
    a,
    ...(r.e !== undefined ? { e: cut(r.e, RECORD_LIMITS.error) } : {}),
    ...(r.l !== undefined ? { l: (r.l as { t: string; s: string }[]).slice(0, RECORD_LIMITS.links).map((l) => ({ t: l.t, s: l.s })) } : {}),
  };
}

/** About how many bytes a kept span record holds (strings at two bytes a character). */
function recordBytes(r: SpanRecord): number {
  let n = 200 + 2 * (r.n.length + r.sv.length + (r.e?.length ?? 0)) + 40 * (r.l?.length ?? 0);
  for (const [k, v] of Object.entries(r.a))
    n +=
      32 +
      2 * k.length +
      (typeof v === "string"
        ? 2 * v.length
        : Array.isArray(v)
          ? (v as unknown[]).reduce<number>((m, x) => m + 16 + (typeof x === "string" ? 2 * x.length : 0), 0)
          : 8);
  return n;
}

const text = (x: unknown): string | undefined => (typeof x === "string" ? x : undefined);
const number = (x: unknown): number | undefined => (finite(x) ? x : undefined);

/** A worker as last heard. */
export interface WorkerView extends WorkerHeartbeat {
  heardAtMs: number;
}

/**
 * A worker as the dashboard shows it: as last heard, or `lost` once silent for
 * `WORKER_SILENT_AFTER_MS` (when the resource manager plans without it), with the state it last
 * said in `lastState`.
 */
export type ShownWorker = Omit<WorkerView, "state"> & { state: WorkerView["state"] | "lost"; lastState?: WorkerView["state"] };

/** What the dashboard keeps at most. */
export interface DashboardLimits {
  traces: number;
  spansPerTrace: number;
  /** Bytes of one trace's spans (a trace of huge spans must not take the whole budget). */
  traceBytes: number;
  /** Bytes of span records in all (about: `recordBytes`); the oldest traces go first past it. */
  spanBytes: number;
  requests: number;
  seconds: number;
  /** A worker silent this long is shown lost (the resource manager's rule). */
  workerLostMs: number;
  /** A worker silent this long is forgotten (ids change as workers restart). */
  workerSilenceMs: number;
  /** Workers listed; past it the one heard from longest ago goes. */
  workers: number;
}

const DASHBOARD_LIMITS: DashboardLimits = {
  traces: 2_000,
  spansPerTrace: 512,
  traceBytes: 2 * 1024 * 1024,
  spanBytes: 64 * 1024 * 1024,
  requests: 300,
  seconds: 600,
  workerLostMs: WORKER_SILENT_AFTER_MS,
  workerSilenceMs: 60_000,
  workers: 1_024,
};

/** The dashboard's model of the running system. */
export class DashboardState {
  private readonly traces = new Map<string, { spans: SpanRecord[]; bytes: number }>();
  /** Bytes of the spans kept (`recordBytes`), at most `limits.spanBytes`. */
  private spanBytes = 0;
  private readonly requests: RequestSummary[] = [];
  private readonly seconds = new Map<number, SecondBucket>();
  private readonly workers = new Map<string, WorkerView>();
  private readonly swapsSeen = new Map<string, number>();
  private prunedAtMs = -Infinity;
  plan: Plan | null = null;
  spansReceived = 0;
  /** Spans not kept because their trace already held `limits.spansPerTrace` spans or `limits.traceBytes` (a caller that puts many requests in one trace). */
  spansDropped = 0;
  /** Sink messages or records that were not span batches or spans (`spanRecordOf`). */
  spansMalformed = 0;

  private readonly limits: DashboardLimits;

  constructor(limits: Partial<DashboardLimits> = {}) {
    this.limits = { ...DASHBOARD_LIMITS, ...limits };
  }

  private bucket(ms: number): SecondBucket {
    const t = Math.floor(ms / 1000);
    let b = this.seconds.get(t);
    if (!b) {
      b = { t, arrivals: 0, served: 0, violations: 0, answered: 0 };
      this.seconds.set(t, b);
      // (Seconds are made in time order but for a report's earlier seconds, a few at most: the
      // first kept one stops the sweep, and one made late goes a sweep or two later.)
      for (const old of this.seconds.keys()) {
        if (old > t - this.limits.seconds) break;
        this.seconds.delete(old);
      }
    }
    return b;
  }

  /**
   * Takes a batch of finished spans, as decoded from the sink (anything: what is not a batch of
   * span records is counted in `spansMalformed` and changes nothing). A trace's place in the
   * eviction order is its latest span's: a slow request keeps its early spans while it runs.
   */
  addSpans(batch: unknown): void {
    if (!Array.isArray(batch)) {
      this.spansMalformed++;
      return;
    }
    const touched = new Set<string>();
    for (const raw of batch) {
      const span = spanRecordOf(raw);
      if (!span) {
        this.spansMalformed++;
        continue;
      }
      this.spansReceived++;
      let trace = this.traces.get(span.t);
      if (trace) this.traces.delete(span.t);
      else trace = { spans: [], bytes: 0 };
      this.traces.set(span.t, trace);
      const bytes = recordBytes(span);
      if (trace.spans.length >= this.limits.spansPerTrace || trace.bytes + bytes > this.limits.traceBytes) {
        this.spansDropped++;
        if (span.n !== REQUEST_SPAN) continue;
      } else {
        trace.spans.push(span);
        trace.bytes += bytes;
        this.spanBytes += bytes;
      }
      // The oldest traces go first, while there are too many or they hold too much (never the one just added to).
      while (this.traces.size > 1 && (this.traces.size > this.limits.traces || this.spanBytes > this.limits.spanBytes)) {
        const [oldest, evicted] = this.traces.entries().next().value!;
        this.traces.delete(oldest);
        this.spanBytes -= evicted.bytes;
      }
      touched.add(span.t);
      if (span.n === REQUEST_SPAN) this.addRequest(span);
    }
    // Stage spans may arrive after their root (other services flush on their own): refresh the
    // requests whose traces this batch added to.
    for (const r of this.requests) if (touched.has(r.traceId)) r.stages = this.stagesOf(r.traceId, r.spanId, r.startMs);
  }

  private addRequest(root: SpanRecord): void {
    const a = root.a;
    const outcome = text(a["hadis.outcome"]) ?? (root.e ? "error" : "ok");
    const sloMet = typeof a["hadis.slo_met"] === "boolean" ? (a["hadis.slo_met"] as boolean) : undefined;
    const models = a["hadis.models"];
    const summary: RequestSummary = {
      traceId: root.t,
      spanId: root.s,
      requestId: text(a["hadis.request_id"]),
      startMs: root.st,
      totalMs: root.d,
      route: text(a["hadis.route"]),
      outcome,
      sloMet,
      sloMs: number(a["hadis.slo_ms"]),
      planEpoch: number(a["hadis.plan_epoch"]),
      models: Array.isArray(models) ? models.filter((m): m is string => typeof m === "string") : undefined,
      score: number(a["hadis.disc.score"]),
      threshold: number(a["hadis.disc.threshold"]),
      fallback: text(a["hadis.fallback"]),
      // (Filled at the end of the batch with the others of its trace: once, with any stage span the batch also holds.)
      stages: [],
    };
    this.requests.unshift(summary);
    if (this.requests.length > this.limits.requests) this.requests.pop();
  }

  /** The stage spans under a request's root span (a caller's trace may hold several requests). */
  private stagesOf(traceId: string, rootSpanId: string, startMs: number): RequestSummary["stages"] {
    const spans = this.traces.get(traceId)?.spans ?? [];
    const children = new Map<string, SpanRecord[]>();
    for (const s of spans) if (s.p !== undefined) (children.get(s.p) ?? children.set(s.p, []).get(s.p)!).push(s);
    // Breadth first from the root, each span once (ids reused by a bad publisher cannot loop);
    // a span's stage is its own `hadis.stage` or its parent's (the worker's spans sit under the
    // router's `light <model>` / `heavy <model>`).
    const under: { span: SpanRecord; stage?: string }[] = [];
    const seen = new Set([rootSpanId]);
    for (let i = 0, frontier: { id: string; stage?: string }[] = [{ id: rootSpanId }]; i < frontier.length; i++) {
      for (const c of children.get(frontier[i].id) ?? []) {
        if (seen.has(c.s)) continue;
        seen.add(c.s);
        const own = c.a["hadis.stage"];
        const stage = own === "light" || own === "heavy" ? own : frontier[i].stage;
        under.push({ span: c, ...(stage ? { stage } : {}) });
        frontier.push({ id: c.s, ...(stage ? { stage } : {}) });
      }
    }
    return under
      .filter(({ span: s }) => s.n !== REQUEST_SPAN && !s.n.startsWith("batch "))
      .sort((x, y) => x.span.st - y.span.st)
      .map(({ span: s, stage }) => ({
        n: s.n,
        sv: s.sv,
        o: Math.max(0, s.st - startMs),
        d: s.d,
        ...(s.e ? { e: true } : {}),
        ...(stage ? { stage } : {}),
      }));
  }

  /**
   * Takes a router's load report, received at `nowMs`. It covers the `intervalMs` before, so its
   * counts are spread over the seconds of that interval in proportion: counted whole in the
   * second they land in, reports a few ms either side of a second's edge made a steady 100
   * requests a second read 100, 0, 200, 100.
   */
  addRouterStats(stats: RouterStats, nowMs: number): void {
    const interval = Math.max(1, stats.intervalMs);
    // (Only the part of a long interval that falls in the seconds kept.)
    const from = Math.max(nowMs - interval, nowMs - this.limits.seconds * 1_000);
    for (let t = Math.floor(from / 1_000); t * 1_000 < nowMs; t++) {
      const share = (Math.min(nowMs, (t + 1) * 1_000) - Math.max(from, t * 1_000)) / interval;
      if (share <= 0) continue;
      const b = this.bucket(t * 1_000);
      b.arrivals += stats.arrivals * share;
      b.served += (stats.served ?? 0) * share;
      b.answered += (stats.answered ?? 0) * share;
      b.violations += (stats.violations ?? 0) * share;
    }
  }

  /** Takes a worker heartbeat. Returns the swaps it completed since the last one. */
  addHeartbeat(beat: WorkerHeartbeat, nowMs: number): number {
    // At most once a second here: heartbeats come from every worker every second.
    if (nowMs - this.prunedAtMs >= 1_000) this.forgetSilent(nowMs);
    this.workers.delete(beat.workerId); // heard last: the back of the order
    this.workers.set(beat.workerId, { ...beat, heardAtMs: nowMs });
    if (this.workers.size > this.limits.workers) {
      // More worker ids than any pool has (a bad publisher): the one heard from longest ago goes.
      const oldest = this.workers.keys().next().value!;
      this.workers.delete(oldest);
      this.swapsSeen.delete(oldest);
    }
    const before = this.swapsSeen.get(beat.workerId) ?? beat.swapsTotal;
    this.swapsSeen.set(beat.workerId, beat.swapsTotal);
    return Math.max(0, beat.swapsTotal - before);
  }

  /** Forgets workers not heard from for `workerSilenceMs` (ids change as workers restart). */
  private forgetSilent(nowMs: number): void {
    this.prunedAtMs = nowMs;
    for (const [id, w] of this.workers) {
      if (nowMs - w.heardAtMs <= this.limits.workerSilenceMs) continue;
      this.workers.delete(id);
      this.swapsSeen.delete(id);
    }
  }

  /** Workers heard from within `workerSilenceMs`, by id; those silent past `workerLostMs` shown `lost`. */
  liveWorkers(nowMs: number): ShownWorker[] {
    this.forgetSilent(nowMs);
    return [...this.workers.values()]
      .sort((a, b) => a.workerId.localeCompare(b.workerId))
      .map((w) => (nowMs - w.heardAtMs > this.limits.workerLostMs ? { ...w, state: "lost", lastState: w.state } : w));
  }

  /** The last `n` seconds (oldest first, gaps filled), excluding the current second. */
  series(nowMs: number, n = 300): SecondBucket[] {
    // At most the seconds kept: `n` may come from a query string (NaN, Infinity, 1e16).
    const count = Number.isNaN(n) ? 0 : Math.max(0, Math.min(this.limits.seconds, Math.floor(n)));
    const last = Math.floor(nowMs / 1000) - 1;
    const out: SecondBucket[] = [];
    for (let t = last - count + 1; t <= last; t++)
      out.push(this.seconds.get(t) ?? { t, arrivals: 0, served: 0, violations: 0, answered: 0 });
    return out;
  }

  /** The most recent requests, newest first. */
  recent(n = 40): RequestSummary[] {
    return this.requests.slice(0, n);
  }

  /**
   * The request listed with this request id (a reply's `requestId`), if still listed: of a keyed
   * request and its deduplicated retries, the one with the most stages (the generation).
   */
  request(requestId: string): RequestSummary | undefined {
    let best: RequestSummary | undefined;
    for (const r of this.requests) if (r.requestId === requestId && (!best || r.stages.length > best.stages.length)) best = r;
    return best;
  }

  /** Every span of a trace, by start time. */
  trace(traceId: string): SpanRecord[] {
    return [...(this.traces.get(traceId)?.spans ?? [])].sort((a, b) => a.st - b.st);
  }

  /** Headline figures over the last `windowS` seconds. */
  summary(nowMs: number, windowS = 10) {
    const win = this.series(nowMs, windowS);
    const sum = (k: keyof SecondBucket) => win.reduce((acc, b) => acc + (b[k] as number), 0);
    const minute = this.series(nowMs, 60);
    const answered = minute.reduce((a, b) => a + b.answered, 0);
    const violations = minute.reduce((a, b) => a + b.violations, 0);
    const latencies = this.requests
      .filter((r) => r.startMs > nowMs - 60_000 && r.outcome === "ok")
      .map((r) => r.totalMs)
      .sort((a, b) => a - b);
    const pct = (p: number) =>
      latencies.length ? latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] : null;
    return {
      demandQps: sum("arrivals") / windowS,
      servedQps: sum("served") / windowS,
      sloViolationRatio: answered ? violations / answered : null,
      answeredLastMinute: answered,
      p50Ms: pct(50),
      p99Ms: pct(99),
      spansReceived: this.spansReceived,
      spansDropped: this.spansDropped,
      spansMalformed: this.spansMalformed,
    };
  }
}
