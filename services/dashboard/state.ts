/**
 * What the dashboard knows, built from what the services publish: finished spans of the traces
 * marked for it (grouped into traces; a `hadis.generate` root span is one request), router load
 * reports (demand, served, SLO outcomes: every request, where the traces are a sample), worker
 * heartbeats and the plan. Pure: time is passed in.
 */
import type { Plan, RouterStats, WorkerHeartbeat } from "../../contracts/messages.ts";
import { REQUEST_SPAN, type SpanRecord } from "../lib/telemetry.ts";

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
  /**
   * The stage spans of the request, relative to its start: name, service, offset ms, duration ms,
   * error, and the stage (light or heavy) the span serves, from its own `hadis.stage` or an ancestor's.
   */
  stages: { n: string; sv: string; o: number; d: number; e?: boolean; stage?: string }[];
}

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
const finite = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);

/**
 * A span record as the services' sinks write it, or null when it is not one: the sink subject is
 * open to any publisher, and a record with odd ids (a span its own parent) or non-numeric times
 * must not reach the trace walks or the page.
 */
export function spanRecordOf(x: unknown): SpanRecord | null {
  if (typeof x !== "object" || x === null) return null;
  const r = x as Record<string, unknown>;
  if (typeof r.t !== "string" || !TRACE_ID.test(r.t) || typeof r.s !== "string" || !SPAN_ID.test(r.s)) return null;
  if (r.p !== undefined && (typeof r.p !== "string" || !SPAN_ID.test(r.p) || r.p === r.s)) return null;
  if (typeof r.n !== "string" || typeof r.sv !== "string" || !finite(r.k) || !finite(r.st) || !finite(r.d) || r.d < 0) return null;
  if (typeof r.a !== "object" || r.a === null || Array.isArray(r.a)) return null;
  if (r.e !== undefined && typeof r.e !== "string") return null;
  if (r.l !== undefined && !(Array.isArray(r.l) && r.l.every((l) => typeof l === "object" && l !== null && TRACE_ID.test(String(l.t)) && SPAN_ID.test(String(l.s))))) return null;
  return x as SpanRecord;
}

const text = (x: unknown): string | undefined => (typeof x === "string" ? x : undefined);
const number = (x: unknown): number | undefined => (finite(x) ? x : undefined);

/** A worker as last heard. */
export interface WorkerView extends WorkerHeartbeat {
  heardAtMs: number;
}

/** The dashboard's model of the running system. */
export class DashboardState {
  private readonly traces = new Map<string, SpanRecord[]>();
  private readonly requests: RequestSummary[] = [];
  private readonly seconds = new Map<number, SecondBucket>();
  private readonly workers = new Map<string, WorkerView>();
  private readonly swapsSeen = new Map<string, number>();
  private prunedAtMs = -Infinity;
  plan: Plan | null = null;
  spansReceived = 0;
  /** Spans not kept because their trace already held `limits.spansPerTrace` (a caller that puts many requests in one trace). */
  spansDropped = 0;
  /** Sink messages or records that were not span batches or spans (`spanRecordOf`). */
  spansMalformed = 0;

  constructor(private readonly limits = { traces: 2_000, spansPerTrace: 512, requests: 300, seconds: 600, workerSilenceMs: 10_000 }) {}

  private bucket(ms: number): SecondBucket {
    const t = Math.floor(ms / 1000);
    let b = this.seconds.get(t);
    if (!b) {
      b = { t, arrivals: 0, served: 0, violations: 0, answered: 0 };
      this.seconds.set(t, b);
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
      else trace = [];
      this.traces.set(span.t, trace);
      if (this.traces.size > this.limits.traces) this.traces.delete(this.traces.keys().next().value!);
      if (trace.length < this.limits.spansPerTrace) trace.push(span);
      else this.spansDropped++;
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
      models: Array.isArray(models) ? models.map(String) : undefined,
      score: number(a["hadis.disc.score"]),
      threshold: number(a["hadis.disc.threshold"]),
      stages: [],
    };
    summary.stages = this.stagesOf(root.t, root.s, root.st);
    this.requests.unshift(summary);
    if (this.requests.length > this.limits.requests) this.requests.pop();
  }

  /** The stage spans under a request's root span (a caller's trace may hold several requests). */
  private stagesOf(traceId: string, rootSpanId: string, startMs: number): RequestSummary["stages"] {
    const spans = this.traces.get(traceId) ?? [];
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
      .map(({ span: s, stage }) => ({ n: s.n, sv: s.sv, o: Math.max(0, s.st - startMs), d: s.d, ...(s.e ? { e: true } : {}), ...(stage ? { stage } : {}) }));
  }

  /** Takes a router's load report. */
  addRouterStats(stats: RouterStats, nowMs: number): void {
    const b = this.bucket(nowMs);
    b.arrivals += stats.arrivals;
    b.served += stats.served ?? 0;
    b.answered += stats.answered ?? 0;
    b.violations += stats.violations ?? 0;
  }

  /** Takes a worker heartbeat. Returns the swaps it completed since the last one. */
  addHeartbeat(beat: WorkerHeartbeat, nowMs: number): number {
    // At most once a second here: heartbeats come from every worker every second.
    if (nowMs - this.prunedAtMs >= 1_000) this.forgetSilent(nowMs);
    this.workers.set(beat.workerId, { ...beat, heardAtMs: nowMs });
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

  /** Workers heard from recently, by id. */
  liveWorkers(nowMs: number): WorkerView[] {
    this.forgetSilent(nowMs);
    return [...this.workers.values()].sort((a, b) => a.workerId.localeCompare(b.workerId));
  }

  /** The last `n` seconds (oldest first, gaps filled), excluding the current second. */
  series(nowMs: number, n = 300): SecondBucket[] {
    // At most the seconds kept: `n` may come from a query string (NaN, Infinity, 1e16).
    const count = Number.isNaN(n) ? 0 : Math.max(0, Math.min(this.limits.seconds, Math.floor(n)));
    const last = Math.floor(nowMs / 1000) - 1;
    const out: SecondBucket[] = [];
    for (let t = last - count + 1; t <= last; t++) out.push(this.seconds.get(t) ?? { t, arrivals: 0, served: 0, violations: 0, answered: 0 });
    return out;
  }

  /** The most recent requests, newest first. */
  recent(n = 40): RequestSummary[] {
    return this.requests.slice(0, n);
  }

  /** Every span of a trace, by start time. */
  trace(traceId: string): SpanRecord[] {
    return [...(this.traces.get(traceId) ?? [])].sort((a, b) => a.st - b.st);
  }

  /** Headline figures over the last `windowS` seconds. */
  summary(nowMs: number, windowS = 10) {
    const win = this.series(nowMs, windowS);
    const sum = (k: keyof SecondBucket) => win.reduce((acc, b) => acc + (b[k] as number), 0);
    const minute = this.series(nowMs, 60);
    const answered = minute.reduce((a, b) => a + b.answered, 0);
    const violations = minute.reduce((a, b) => a + b.violations, 0);
    const latencies = this.requests.filter((r) => r.startMs > nowMs - 60_000 && r.outcome === "ok").map((r) => r.totalMs).sort((a, b) => a - b);
    const pct = (p: number) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] : null);
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
