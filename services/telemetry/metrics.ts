/**
 * Prometheus metrics of HADIS (prom-client, one registry per process). Services record what they
 * see (requests, stages, workers, swaps); the resource manager calls `recordPlan`, `recordSolve`,
 * `recordDemand` and `recordQueueDepths`. `startMetricsServer(port)` serves `/metrics`.
 */
import { createServer, type Server } from "node:http";
import { serveProbe, type Health } from "./health.ts";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { GenerateReply, Plan, WorkerHeartbeat } from "../../contracts/messages.ts";
import type { SloOutcome } from "../../actors/request/reply.ts";
import type { SpanLoss } from "./span-loss.ts";

/** The process registry every HADIS metric lives in. */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });

/** Seconds buckets from 1 ms to 10 min: the profile emulation at time scales 0.001..1, and deadlines up to 600 s. */
const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600];

const requests = new Counter({
  name: "hadis_requests_total",
  help: "Requests answered by the routers, by route taken (none for refused or failed ones) and outcome (ok or the error code).",
  labelNames: ["route", "outcome"] as const,
  registers: [registry],
});
const sloRequests = new Counter({
  name: "hadis_slo_requests_total",
  help: "Accepted requests (the SLO violation ratio's denominator): bad input and a stopping router's refusals are not.",
  registers: [registry],
});

const sloViolations = new Counter({
  name: "hadis_slo_violations_total",
  help: "Accepted requests that missed the SLO: failed, expired, or served after the SLO in force.",
  registers: [registry],
});
const stageDuration = new Histogram({
  name: "hadis_stage_duration_seconds",
  help: "Time per request stage (route, queue, light, judge, heavy, total).",
  labelNames: ["stage"] as const,
  buckets: SECONDS_BUCKETS,
  registers: [registry],
});
const batchSize = new Histogram({
  name: "hadis_batch_size",
  help: "Size of the batches the workers ran, by model.",
  labelNames: ["model"] as const,
  buckets: [1, 2, 4, 8, 16, 32],
  registers: [registry],
});
const verdicts = new Counter({
  name: "hadis_discriminator_verdicts_total",
  help: "Discriminator verdicts on light images: accept or escalate.",
  labelNames: ["verdict"] as const,
  registers: [registry],
});
const escalationsSkipped = new Counter({
  name: "hadis_escalations_skipped_total",
  help: "Light images the discriminator rejected but the router served: the time left could not fit the heavy model.",
  registers: [registry],
});
const admissions = new Counter({
  name: "hadis_router_admissions_total",
  help: "hadis-plus's admissions by choice: the whole cascade, straight to the heavy model, or the light image only.",
  labelNames: ["choice"] as const,
  registers: [registry],
});
const judgeFailures = new Counter({
  name: "hadis_judge_failures_total",
  help: "Light images served unjudged because the judge failed or had not answered 25 ms before the request's deadline.",
  registers: [registry],
});
const judgeExpired = new Counter({
  name: "hadis_judge_expired_total",
  help: "Light images the discriminator dropped unscored: the router had stopped waiting for the verdict before the judge reached them.",
  registers: [registry],
});
const lightFallbacks = new Counter({
  name: "hadis_light_fallbacks_total",
  help: "Requests served a light image because their heavy generation failed or had not come before the deadline, by what sent them to the heavy model: judge (a rejected light image) or router (a hard prompt).",
  labelNames: ["sent_by"] as const,
  registers: [registry],
});
const spansLost = new Counter({
  name: "hadis_trace_spans_lost_total",
  help: "Sampled spans the OTLP export lost: its queue was full, the export failed, or no exporter could be built from the configuration.",
  labelNames: ["reason"] as const,
  registers: [registry],
});
const rejected = new Counter({
  name: "hadis_messages_rejected_total",
  help: "Control messages the resource manager refused (they do not decode, fail their schema, or name another sender than their subject), by kind: heartbeat or router_stats.",
  labelNames: ["kind"] as const,
  registers: [registry],
});
const givenUp = new Counter({
  name: "hadis_work_given_up_total",
  help: "Work items JetStream delivered max_deliver times without an acknowledgement (each worker that took one crashed or stalled), by model: their requests' stages failed at once with generation_failed.",
  labelNames: ["model"] as const,
  registers: [registry],
});
const queueDepth = new Gauge({
  name: "hadis_queue_depth",
  help: "Work items waiting in a model's work queue (not yet delivered to a worker; what the planner reads).",
  labelNames: ["model"] as const,
  registers: [registry],
});
const workers = new Gauge({
  name: "hadis_workers",
  help: "Workers by the model they hold and their state (serving, loading, unloading, idle, draining, failed).",
  labelNames: ["model", "state"] as const,
  registers: [registry],
});
const swaps = new Counter({
  name: "hadis_swaps_total",
  help: "Model swaps completed by workers.",
  registers: [registry],
});
const planEpoch = new Gauge({ name: "hadis_plan_epoch", help: "Epoch of the plan in force.", registers: [registry] });
const planWorkers = new Gauge({
  name: "hadis_plan_workers",
  help: "Workers the plan in force gives each model.",
  labelNames: ["model"] as const,
  registers: [registry],
});
const planBatch = new Gauge({
  name: "hadis_plan_batch_size",
  help: "Batch size the plan in force gives each model.",
  labelNames: ["model"] as const,
  registers: [registry],
});
const planThreshold = new Gauge({
  name: "hadis_plan_threshold_ratio",
  help: "Thresholds of the plan in force: router (share sent to heavy) and discriminator (share escalated).",
  labelNames: ["stage"] as const,
  registers: [registry],
});
const planPair = new Gauge({
  name: "hadis_plan_info",
  help: "The plan in force: 1 for its (light, heavy) pair and policy.",
  labelNames: ["light", "heavy", "policy"] as const,
  registers: [registry],
});
const planFid = new Gauge({
  name: "hadis_plan_expected_fid",
  help: "Expected FID of the plan in force (NaN when its policy does not estimate one).",
  registers: [registry],
});
const planHeavyShare = new Gauge({
  name: "hadis_plan_heavy_share_ratio",
  help: "Expected share of requests ending on the heavy model.",
  registers: [registry],
});
const sloSeconds = new Gauge({ name: "hadis_slo_seconds", help: "Latency SLO in force.", registers: [registry] });
const solveSeconds = new Histogram({
  name: "hadis_milp_solve_seconds",
  help: "Time the resource manager spent solving one MILP (one control tick).",
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});
const modelUnavailable = new Gauge({
  name: "hadis_model_unavailable",
  help: "1 while a pool model is out of the planner's pool because it failed on several workers (its loads, or batch after batch), else 0.",
  labelNames: ["model"] as const,
  registers: [registry],
});
const workersBenched = new Gauge({
  name: "hadis_workers_benched",
  help: "Workers left out of the plan because a model failed on them alone.",
  registers: [registry],
});
const demand = new Gauge({
  name: "hadis_demand_requests_per_second",
  help: "Demand estimate of the resource manager (EWMA of arrivals), requests per second.",
  registers: [registry],
});

/** Records one answered `hadis.generate` request, with how it counts in the SLO (`sloOutcome`). */
export function recordRequest(reply: GenerateReply | null, outcome: string, slo: SloOutcome): void {
  requests.inc({ route: reply?.route ?? "none", outcome });
  // A retry answered from its first attempt's reply ran no stage: its timings are that attempt's, already recorded.
  if (reply && !reply.deduplicated) {
    const t = reply.timings;
    stageDuration.observe({ stage: "route" }, t.routeMs / 1e3);
    stageDuration.observe({ stage: "queue" }, t.queueWaitMs / 1e3);
    if (reply.models.light) stageDuration.observe({ stage: "light" }, t.lightMs / 1e3);
    if (reply.score !== undefined) stageDuration.observe({ stage: "judge" }, t.judgeMs / 1e3);
    if (reply.models.heavy) stageDuration.observe({ stage: "heavy" }, t.heavyMs / 1e3);
    stageDuration.observe({ stage: "total" }, t.totalMs / 1e3);
  }
  if (slo.answered) sloRequests.inc();
  if (slo.violated) sloViolations.inc();
}

/** Counts spans the OTLP export lost, by why. */
export function recordSpansLost(reason: SpanLoss, n: number): void {
  spansLost.inc({ reason }, n);
}

/** Counts a control message the resource manager refused. */
export function recordRejected(kind: "heartbeat" | "router_stats"): void {
  rejected.inc({ kind });
}

/** Counts a work item JetStream gave up on (max-deliveries advisory). */
export function recordGivenUp(model: string): void {
  givenUp.inc({ model });
}

/** Records a batch a worker ran. */
export function recordBatch(model: string, size: number): void {
  batchSize.observe({ model }, size);
}

/** Records a discriminator verdict. */
export function recordVerdict(accept: boolean): void {
  verdicts.inc({ verdict: accept ? "accept" : "escalate" });
}

/** Records a rejected light image served because the heavy model could not answer in time. */
export function recordEscalationSkipped(): void {
  escalationsSkipped.inc();
}

/** Counts one of hadis-plus's admissions (`cascade`, `heavy` or `light`). */
export function recordAdmission(choice: string): void {
  admissions.inc({ choice });
}

/** Counts a light image served unjudged because the judge failed or did not answer in time. */
export function recordJudgeFailure(): void {
  judgeFailures.inc();
}

/** Counts light images the discriminator dropped unscored (their verdict no longer awaited). */
export function recordJudgeExpired(n: number): void {
  judgeExpired.inc(n);
}

/** Records a request served a light image because its heavy generation failed. */
export function recordLightFallback(sentBy: "judge" | "router"): void {
  lightFallbacks.inc({ sent_by: sentBy });
}

/** Records completed swaps. */
export function recordSwaps(n: number): void {
  if (n > 0) swaps.inc(n);
}

/** Sets the worker counts by (model, state) from the latest heartbeat of each worker. */
export function recordWorkers(beats: Iterable<Pick<WorkerHeartbeat, "model" | "state">>): void {
  workers.reset();
  for (const b of beats) workers.inc({ model: b.model ?? "none", state: b.state });
}

/** Sets the plan gauges from the plan in force. */
export function recordPlan(plan: Plan): void {
  planEpoch.set(plan.epoch);
  planWorkers.reset();
  planBatch.reset();
  for (const [model, alloc] of Object.entries(plan.models)) {
    planWorkers.set({ model }, alloc.workers);
    planBatch.set({ model }, alloc.batchSize);
  }
  planThreshold.set({ stage: "router" }, plan.routerThreshold);
  planThreshold.set({ stage: "discriminator" }, plan.discThreshold);
  planPair.reset();
  planPair.set({ light: plan.pair.light, heavy: plan.pair.heavy, policy: plan.policy }, 1);
  // NaN (no value) when the plan's policy does not estimate FID: not the last plan's figure.
  planFid.set(plan.expectedFid ?? Number.NaN);
  planHeavyShare.set(plan.heavyShare);
  sloSeconds.set(plan.sloMs / 1e3);
}

/** Records one MILP solve (control tick), in ms. */
export function recordSolve(ms: number): void {
  solveSeconds.observe(ms / 1e3);
}

/** Records the demand estimate, requests per second. */
export function recordDemand(qps: number): void {
  demand.set(qps);
}

/** Records every model's work-queue depth (items not yet delivered); a model not in `depths` leaves the metric. */
export function recordQueueDepths(depths: Record<string, number>): void {
  queueDepth.reset();
  for (const [model, n] of Object.entries(depths)) queueDepth.set({ model }, n);
}

/** What failed loads keep out of planning: `models` of the pool (by name) out, and benched workers. */
export function recordExcluded(pool: readonly string[], excluded: { models: readonly string[]; workers: readonly string[] }): void {
  for (const model of pool) modelUnavailable.set({ model }, excluded.models.includes(model) ? 1 : 0);
  workersBenched.set(excluded.workers.length);
}

/** The registry in Prometheus text format. */
export function metricsText(): Promise<string> {
  return registry.metrics();
}

/** Content type of the Prometheus text format. */
export const METRICS_CONTENT_TYPE = registry.contentType;

/** A running `/metrics` server. */
export interface MetricsServer {
  url: string;
  stop(): Promise<void>;
}

/** The URL of `path` on a server listening on `host:port` (an IPv6 address in brackets). */
export const listenUrl = (host: string, port: number, path: string) => `http://${host.includes(":") ? `[${host}]` : host}:${port}${path}`;

/**
 * Serves `/metrics` on 127.0.0.1 (or `host`) at `port` (0 picks a free port), and the probes
 * `/healthz` and `/readyz` (what `health` says; "starting" until there is one).
 */
export async function startMetricsServer(port: number, host = "127.0.0.1", health?: () => Health): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (serveProbe(req, res, health)) return;
    if (req.url?.split("?")[0] !== "/metrics") {
      res.writeHead(404).end("not found; try /metrics, /healthz or /readyz\n");
      return;
    }
    metricsText().then(
      (text) => res.writeHead(200, { "Content-Type": METRICS_CONTENT_TYPE }).end(text),
      (err) => res.writeHead(500).end(String(err)),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const actualPort = typeof address === "object" && address ? address.port : port;
  return {
    url: listenUrl(host, actualPort, "/metrics"),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
