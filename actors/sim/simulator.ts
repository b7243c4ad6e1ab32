/**
 * The profile-driven serving system as a deterministic discrete-event simulation: no NATS, a
 * simulated clock, and the live system's own pieces — `controlTick` (policy → MILP → assignment
 * → damping), `decideRoute` with the router's scorer and threshold, the profile judge, per-model
 * FIFO queues and workers with the batch, expiry and swap semantics of `WorkerAgent`.
 *
 * The request lifecycle mirrors `RequestMachine` in a lean event loop (route → light → judge →
 * heavy, deadline from arrival) rather than running one XState actor per request; the live
 * router's transport details that change outcomes are mirrored too (see `applyPlan`). The
 * artifact's mechanisms (`actors/artifact/mechanisms.ts`) switch parts of it to the paper
 * artifact's behaviour, one by one.
 */
import type { Plan, Route } from "../../contracts/messages.ts";
import { Routes } from "../../contracts/messages.ts";
import { allocationPeriodMs, artifactTick } from "../artifact/controller.ts";
import { ControllerLedger, type LedgerOutcome } from "../artifact/ledger.ts";
import { NATIVE, has } from "../artifact/mechanisms.ts";
import { admissionFactor, isHadisFamily, policyFor, tableOf } from "../artifact/policies.ts";
import { artifactExecMs, plannerView } from "../artifact/runtimes.ts";
import { ARTIFACT_STOP_AFTER_TRACE_MS, fidSourceOf } from "../artifact/scoring.ts";
import { ARTIFACT_JUDGE_MS, ArtifactRouterThreshold, artifactQualified, takeArtifactBatch } from "../artifact/worker-rules.ts";
import { ArrivalRate } from "../control/arrivals.ts";
import { controlTick, newControlState, type TickConfig } from "../control/reconcile.ts";
import { acceptsLight } from "../judge/verdict.ts";
import { batchLatencyMs, referenceIndexFor } from "../profile/profile-set.ts";
import { mulberry32 } from "../profile/stats.ts";
import { REPLY_MARGIN_MS } from "../request/types.ts";
import { refusal } from "../routing/admission.ts";
import { ReferenceFeatureScorer } from "../routing/difficulty.ts";
import { GenerationFloor } from "../routing/generation-floor.ts";
import { moveTarget } from "../routing/move-target.ts";
import { decideRoute } from "../routing/route-policy.ts";
import { admissionChoice, escalationFits, hardFallsBackToLight, stageEstimateMs } from "../routing/deadline-aware.ts";
import { EventQueue } from "./event-queue.ts";
import type { RequestRecord } from "./scoring.ts";
import type { SimConfig, SimEvent, SimRequest, SimResult, SimWorker, Stage, WorkItem } from "./types.ts";

export type { SimConfig, SimPlanChange, SimResult } from "./types.ts";

/** Runs one policy over a trace; deterministic for the same inputs and seed. */
export async function simulate(config: SimConfig): Promise<SimResult> {
  const { profiles, timeScale, sloMs } = config;
  const fidelity = config.fidelity ?? NATIVE;
  const on = (m: Parameters<typeof has>[1]) => has(fidelity, m);
  const [dispatch, drops, workerJudge, freeSwaps, artifactControl] = [on("dispatch"), on("drops"), on("latency"), on("swaps"), on("tick")];
  const tickMs = config.tickMs ?? Math.max(500, 20_000 * timeScale);
  const statsEveryMs = config.statsEveryMs ?? 1_000;
  const warmupMs = config.warmupMs ?? (artifactControl ? 10_000 : 2 * tickMs);
  const judgeLatencyMs = config.judgeLatencyMs ?? profiles.pool.judge.latencyMs * timeScale;
  const policy = policyFor(config.policyName, fidelity);
  const planning = plannerView(profiles, workerJudge, timeScale);
  const tick: TickConfig = {
    policyName: config.policyName,
    policy,
    profiles: planning,
    solve: config.solve,
    sloMs,
    timeScale,
    queueSafety: config.queueSafety ?? 1.5,
  };
  const control = newControlState(config.demandHalfLifeMs ?? Math.max(1_000, 20_000 * timeScale));
  const agenda = new EventQueue<SimEvent>();
  const random = mulberry32(config.seed * 7_919 + 17);
  /** Shared per-model queues (our design), or under random dispatch the items no worker is listed for yet. */
  const queues = new Map<string, WorkItem[]>(profiles.models.map((m) => [m.name, []]));
  const workers: SimWorker[] = Array.from({ length: config.workers }, (_, i) => ({
    id: `w-${String(i).padStart(2, "0")}`,
    model: null,
    desired: null,
    batchSize: 1,
    busy: false,
    batch: [],
    batchModel: null,
    batchMs: 0,
    swaps: 0,
    unloading: null,
    reported: null,
    queue: [],
  }));
  /** Idle workers waiting on a model's queue, in the order they started waiting (pull order). */
  const waitingPulls = new Map<string, SimWorker[]>(profiles.models.map((m) => [m.name, []]));
  /** The load balancer's routing table: workers listed per model (random dispatch). */
  let routing = new Map<string, SimWorker[]>();
  const result: SimResult = {
    records: [],
    plans: [],
    swaps: 0,
    loads: [],
    ticks: 0,
    expiredDrops: 0,
    wastedItems: 0,
    movedItems: 0,
    escalationsSkipped: 0,
    lightFallbacks: 0,
    admissions: { cascade: 0, heavy: 0, light: 0 },
    leftInQueue: {},
    unfinished: 0,
    rows: [],
  };
  /** What the live router learns from results: each model's fastest recent generation. */
  const floor = new GenerationFloor();
  let plan: Plan | null = null;
  let now = -warmupMs;
  const ledger = new ControllerLedger(
    profiles.models.map((m) => m.name),
    now,
  );
  let arrivalsSinceReport = 0;
  let lastReportMs = now;
  // The manager's demand sample (live: services/resource-manager); one router here.
  const arrivalRate = new ArrivalRate();
  const routerSilentAfterMs = Math.max(3_000, 3 * statsEveryMs);
  let open = config.arrivals.length;
  /** Requests the router holds (arrived, not answered): what its admission bound counts. */
  let routerInFlight = 0;
  // The artifact's router runs on HADIS-family light workers only (`is_lightweight`).
  const reference = on("hadis") && isHadisFamily(config.policyName) ? new ReferenceFeatureScorer(profiles) : null;
  const artifactThreshold = reference ? new ArtifactRouterThreshold(reference.referenceScores) : null;
  const configSource = fidSourceOf(config.policyName) === "config";
  const worstFid = Math.max(...tableOf(config.policyName, profiles).map((r) => r.fid));
  const giveUpAfterMs = drops ? 2 * sloMs : sloMs;
  const startLimitMs = admissionFactor(config.policyName, fidelity) * sloMs;
  /** hadis-plus decides per request from the path ahead (deadline-aware cascade). */
  const deadlineAware = config.policyName === "hadis-plus" || config.policyName === "clairvoyant";

  const requests: SimRequest[] = config.arrivals.map((a, index) => {
    const prompt = config.prompts[a.promptIdx % config.prompts.length];
    const refIndex = referenceIndexFor(profiles, prompt).index;
    const sameList = a.promptIdx < profiles.reference.prompts.length && profiles.reference.prompts[a.promptIdx] === prompt;
    return {
      index,
      id: `${config.seed}-${index}`,
      arrivalMs: a.atMs,
      prompt,
      refIndex,
      seqIndex: sameList ? a.promptIdx : refIndex,
      deadlineAtMs: a.atMs + giveUpAfterMs,
      waiting: null,
      ended: false,
    };
  });
  for (const req of requests) agenda.push(req.arrivalMs, { kind: "arrival", req });
  // Every request has ended by its deadline; the clock stops after the last one, so a request
  // left open by a bug shows as `unfinished` instead of ticking forever.
  const lastDeadlineMs = requests.reduce((m, r) => Math.max(m, r.deadlineAtMs), now);
  const lastArrivalMs = requests.reduce((m, r) => Math.max(m, r.arrivalMs), now);
  const running = () => open > 0 && now < lastDeadlineMs;
  if (!artifactControl) agenda.push(now + 250, { kind: "tick" });
  agenda.push(now, { kind: "second" });
  agenda.push(now + statsEveryMs, { kind: "stats" });
  if (dispatch) agenda.push(now, { kind: "routing" });
  const heartbeatEveryMs = config.heartbeatEveryMs ?? 1_000;
  // Half a beat before the first tick: on average what a live manager's view lags by.
  if (heartbeatEveryMs > 0) agenda.push(now + 250 - heartbeatEveryMs / 2 + heartbeatEveryMs, { kind: "beat" });

  const scoreOf = (model: string, req: SimRequest) => profiles.reference.scores.get(model)?.[req.refIndex];
  const isCascade = (p: Plan | null) => p !== null && p.pair.light !== p.pair.heavy;

  function finish(req: SimRequest, record: Omit<RequestRecord, "arrivalMs">): void {
    // A request machine ends once; a second end would be a simulator bug, not an outcome.
    if (req.ended) throw new Error(`request ${req.id} ended twice (${req.record!.outcome}, then ${record.outcome})`);
    req.ended = true;
    req.waiting = null;
    req.record = { arrivalMs: req.arrivalMs, ...record };
    open--;
    routerInFlight--;
    const filed: LedgerOutcome =
      record.outcome === "dropped" ? "drop" : record.outcome === "timedOut" || (record.latencyMs ?? 0) > sloMs ? "timeout" : "succeed";
    ledger.end(req.index, now, filed, drops && record.outcome === "dropped");
    if (config.purgeFinished ?? true) {
      for (const [m, q] of queues)
        if (q.some((it) => it.req === req))
          queues.set(
            m,
            q.filter((it) => it.req !== req),
          );
      if (dispatch) for (const w of workers) if (w.queue.some((it) => it.req === req)) w.queue = w.queue.filter((it) => it.req !== req);
    }
  }

  function serve(req: SimRequest, model: string, route: Route, fallback?: string): void {
    const models =
      route === Routes.light ? { light: model } : route === Routes.heavy ? { heavy: model } : { light: req.lightModel, heavy: model };
    finish(req, {
      latencyMs: now - req.arrivalMs,
      outcome: "served",
      route,
      models,
      servedModel: model,
      servedScore: scoreOf(model, req),
      ...(fallback ? { fallback } : {}),
    });
  }

  /** hadis-plus: how long a generation of `model` queued now would take (the batches ahead, then its own). */
  function estimateMs(model: string): number {
    const a = plan?.models[model];
    if (!a || a.workers === 0) return Number.POSITIVE_INFINITY;
    return stageEstimateMs(queueDepth()[model] ?? 0, a.workers, a.batchSize, execMs(model, a.batchSize));
  }
  /** hadis-plus: whether the heavy model has no backlog beyond one round of its batches. */
  function heavyHasRoom(model: string): boolean {
    const a = plan?.models[model];
    return a !== undefined && (queueDepth()[model] ?? 0) < a.workers * a.batchSize;
  }
  /** The request's SLO deadline (its own deadline is 2 × SLO under the artifact's drops). */
  const sloDeadline = (req: SimRequest) => req.arrivalMs + sloMs;

  /** Queues work as the router's generate actor does: to the model playing the stage now if the decided one has no workers. */
  function enqueue(req: SimRequest, stage: Stage, decided: string): void {
    const model = (plan && moveTarget(plan, stage, decided)) ?? decided;
    req.waiting = stage;
    req.waitingModel = model;
    ledger.arrival(model);
    push({ req, stage, model, deadlineAtMs: req.deadlineAtMs });
  }

  /** A random worker the load balancer lists for `model` (none: null). Without free swaps, only workers still meant to hold it. */
  function pickWorker(model: string): SimWorker | null {
    const listed = (routing.get(model) ?? []).filter((w) => freeSwaps || w.desired === model);
    return listed.length > 0 ? listed[Math.floor(random() * listed.length)] : null;
  }

  function push(item: WorkItem): void {
    if (dispatch) {
      const w = pickWorker(item.model);
      if (!w) return void queues.get(item.model)!.push(item);
      w.queue.push(item);
      if (!w.busy) advance(w);
      return;
    }
    queues.get(item.model)!.push(item);
    const idle = waitingPulls.get(item.model)!;
    while (idle.length > 0 && queues.get(item.model)!.length > 0) {
      const w = idle.shift()!;
      if (!w.busy && w.model === item.model && w.desired === item.model) pull(w);
    }
  }

  /** The worker loop after a batch, a swap or a wake-up (WorkerAgent.run). */
  function advance(w: SimWorker): void {
    if (w.busy) return;
    if (w.desired !== w.model) return startSwap(w);
    if (!w.model) return;
    pull(w);
  }

  /** Execution time of a batch of `n` on `model`: the profile's, or the artifact's table plus its judge. */
  const execMs = (model: string, n: number) =>
    workerJudge
      ? artifactExecMs(profiles.byName.get(model)!, n, timeScale) + ARTIFACT_JUDGE_MS
      : batchLatencyMs(profiles.byName.get(model)!, n, timeScale);
  const checkMs = (model: string, n: number) =>
    workerJudge ? artifactExecMs(profiles.byName.get(model)!, n, timeScale) : batchLatencyMs(profiles.byName.get(model)!, n, timeScale);

  function pull(w: SimWorker): void {
    const model = w.model!;
    const queue = dispatch ? w.queue : queues.get(model)!;
    for (;;) {
      if (queue.length === 0) {
        if (dispatch) return;
        const idle = waitingPulls.get(model)!;
        if (!idle.includes(w)) idle.push(w);
        return;
      }
      let batch: WorkItem[];
      if (drops) {
        const taken = takeArtifactBatch(
          queue,
          w.batchSize,
          (n) => checkMs(model, n),
          (it) => now - it.req.arrivalMs,
          startLimitMs,
        );
        result.expiredDrops += taken.dropped.length;
        batch = taken.batch;
      } else {
        const taken = queue.splice(0, w.batchSize);
        // Expired items are dropped unexecuted; they still took their place in the pull.
        batch = taken.filter((it) => it.deadlineAtMs > now);
        result.expiredDrops += taken.length - batch.length;
      }
      if (batch.length === 0) continue;
      if (!dispatch) {
        const idle = waitingPulls.get(model)!;
        const at = idle.indexOf(w);
        if (at >= 0) idle.splice(at, 1);
      }
      w.busy = true;
      w.batch = batch;
      w.batchModel = model;
      w.batchMs = execMs(model, batch.length);
      agenda.push(now + w.batchMs, { kind: "batchDone", worker: w });
      return;
    }
  }

  /** WorkerAgent.swap: unload first; the model to load is chosen when the unload is done. Free under the artifact's `swaps`. */
  function startSwap(w: SimWorker): void {
    const from = w.model;
    if (from) {
      const idle = waitingPulls.get(from)!;
      const at = idle.indexOf(w);
      if (at >= 0) idle.splice(at, 1);
    }
    if (freeSwaps) {
      w.model = w.desired;
      if (from && w.desired) w.swaps++;
      if (w.desired) result.loads.push({ atMs: now, workerId: w.id, model: w.desired });
      return advance(w);
    }
    w.busy = true;
    w.model = null;
    if (!from) return startLoad(w, null);
    w.unloading = from;
    agenda.push(now + profiles.byName.get(from)!.unloadMs * timeScale, { kind: "unloaded", worker: w, from });
  }

  /** Loads what the plan wants now: a plan that changed during the unload is followed, not the one the swap began for. */
  function startLoad(w: SimWorker, from: string | null): void {
    const to = w.desired;
    if (!to) {
      w.busy = false;
      return;
    }
    agenda.push(now + profiles.byName.get(to)!.loadMs * timeScale, { kind: "loaded", worker: w, from, to });
  }

  /**
   * The stage a model plays under the plan in force (the artifact's workers act by their level,
   * whatever the query came for): a cascade's models past its light one make final images; the
   * light model, or any model of a plan without cascade, makes light ones (judged when the plan
   * escalates any).
   */
  const roleOf = (model: string): Stage => (isCascade(plan) && model !== plan!.pair.light ? "heavy" : "light");

  /**
   * A worker's result reaches the router (PendingWork.deliver): the first result for the stage the
   * request waits on wins, whatever model made it (a moved copy not yet taken is removed); a late
   * copy of another stage's work is dropped. Under the artifact's per-worker queues kept through
   * swaps, the item is what the worker that ran it makes of it.
   */
  function deliver(item: WorkItem, ran: string, batchMs: number): void {
    const req = item.req;
    if (req.ended) return void result.wastedItems++;
    if (dispatch && freeSwaps) {
      item = { ...item, stage: roleOf(ran), model: ran };
      req.waiting = item.stage;
      req.waitingModel = ran;
    }
    if (req.waiting !== item.stage) return void result.wastedItems++;
    floor.observe(item.model, batchMs); // the live router learns from the results it takes
    const stage = req.waiting;
    req.waiting = null;
    if (item.model !== req.waitingModel) {
      // The original answered before its moved copy ran (PendingWork's onSuperseded): the copy
      // leaves its queue, unless a worker has taken it already.
      const copies = queues.get(req.waitingModel!);
      const at = copies ? copies.findIndex((x) => x.req === req && x.stage === stage) : -1;
      if (at >= 0) copies!.splice(at, 1);
    }
    if (stage === "heavy") return serve(req, item.model, req.lightModel ? Routes.lightThenHeavy : Routes.heavy);
    req.lightModel = item.model;
    const skip = dispatch && freeSwaps ? !isCascade(plan) || plan!.discThreshold <= 0 : req.decision!.skipJudge;
    if (skip) return serve(req, item.model, Routes.light, req.degraded ? "degraded" : undefined);
    if (workerJudge) return void judge(req); // synchronous: the worker's own verdict
    agenda.push(now + judgeLatencyMs, { kind: "judged", req });
  }

  /** The discriminator's verdict on a light image, then serve it or escalate it. */
  async function judge(req: SimRequest): Promise<void> {
    // The discriminator judges against the threshold of the plan in force now.
    const share = (plan as Plan | null)?.discThreshold ?? 0;
    let accept: boolean;
    if (workerJudge) {
      const scores = profiles.reference.scores.get(req.lightModel!)!;
      accept = artifactQualified(scores[req.seqIndex], profiles.reference.sortedScores.get(req.lightModel!)!, share);
    } else {
      const [score] = await config.judge.score([{ prompt: req.prompt, model: req.lightModel!, image: new Uint8Array(0) }]);
      accept = acceptsLight(score, config.judge.thresholdFor(req.lightModel!, share), share);
    }
    const heavy = dispatch && freeSwaps ? (isCascade(plan) ? plan!.pair.heavy : null) : req.decision!.pair.heavy;
    if (accept || heavy === null) serve(req, req.lightModel!, Routes.light);
    else if (deadlineAware && (req.lightOnly || !escalationFits(sloDeadline(req) - now, estimateMs(heavy)))) {
      // hadis-plus: the heavy model cannot remake it in time, so the light image goes out now, degraded.
      result.escalationsSkipped++;
      serve(req, req.lightModel!, Routes.light, "degraded");
    } else if (drops || deadlineAware || req.deadlineAtMs - now >= floor.floorMs(heavy)) {
      enqueue(req, "heavy", heavy);
      if (!drops) agenda.push(Math.max(now, req.deadlineAtMs - REPLY_MARGIN_MS), { kind: "lightBeforeDeadline", req });
    } else {
      // The live router's escalation check: the heavy model cannot answer in the time left.
      result.escalationsSkipped++;
      serve(req, req.lightModel!, Routes.light);
    }
  }

  /** A new plan: workers follow it, and waiting work on models left without workers moves (the live router's rescue). */
  function applyPlan(next: Plan): void {
    plan = next;
    for (const w of workers) {
      const model = next.assignment[w.id] ?? null;
      w.batchSize = model ? Math.max(1, next.models[model]?.batchSize ?? 1) : 1;
      w.desired = model;
    }
    if (dispatch) redispatch(next);
    else moveStranded(next);
    for (const w of workers) advance(w);
  }

  /** Shared queues: items of a model left without workers go to the model now playing their stage. */
  function moveStranded(next: Plan): void {
    for (const [model, queue] of queues) {
      const keep: WorkItem[] = [];
      const move: { item: WorkItem; to: string }[] = [];
      for (const item of queue) {
        const to = isWaitedOn(item) ? moveTarget(next, item.stage, model) : null;
        if (to) move.push({ item, to });
        else keep.push(item);
      }
      queues.set(model, keep);
      // Items a worker is still running are deleted from the stream too and re-queued: the live
      // router cannot tell them from queued ones, so they run twice (first result wins). Once
      // moved, the request waits on the copy, so the running item is not moved again.
      for (const w of workers) {
        if (w.busy && w.batch.length > 0 && w.batch[0].model === model) {
          for (const item of w.batch) {
            const to = isWaitedOn(item) ? moveTarget(next, item.stage, model) : null;
            if (to) move.push({ item: { ...item }, to });
          }
        }
      }
      for (const { item, to } of move) {
        result.movedItems++;
        item.req.waitingModel = to;
        push({ ...item, model: to });
      }
    }
  }

  /** Per-worker queues: a worker's queue stays with it through a free swap; otherwise its items go to workers of their model (or the one playing their stage). */
  function redispatch(next: Plan): void {
    if (freeSwaps) return;
    for (const w of workers) {
      const leaving = w.queue.filter((it) => it.model !== w.desired);
      if (leaving.length === 0) continue;
      w.queue = w.queue.filter((it) => it.model === w.desired);
      for (const item of leaving) {
        if (!isWaitedOn(item)) continue;
        const to = moveTarget(next, item.stage, item.model) ?? item.model;
        result.movedItems++;
        item.req.waitingModel = to;
        push({ ...item, model: to });
      }
    }
  }

  /** Whether the router still waits on this item (the live router moves only its pending entry). */
  function isWaitedOn(item: WorkItem): boolean {
    return !item.req.ended && item.req.waiting === item.stage && item.req.waitingModel === item.model;
  }

  /** Items waiting per model now: shared queues, or the queues of each model's workers. */
  function queueDepth(): Record<string, number> {
    const depth: Record<string, number> = {};
    for (const [m, q] of queues) depth[m] = q.length;
    if (dispatch) for (const w of workers) if (w.desired) depth[w.desired] = (depth[w.desired] ?? 0) + w.queue.length;
    return depth;
  }

  function adopt(p: Plan, swapped: number, demandQps: number): void {
    result.plans.push({
      atMs: now,
      epoch: p.epoch,
      expectedFid: p.expectedFid,
      pair: p.pair,
      routerThreshold: p.routerThreshold,
      discThreshold: p.discThreshold,
      models: p.models,
      degraded: p.degraded ?? 0,
      swapped,
      demandQps,
      reason: p.reason,
    });
    applyPlan(p);
  }

  /** The demand a planner sees: arrivals per second (our design), or the artifact's in-flight signal. */
  const plannedDemand = (): number | undefined => config.demandOracle?.(now) ?? (on("demand") ? ledger.signals.demand : undefined);

  async function runTick(): Promise<void> {
    result.ticks++;
    const { qps: arrivalsQps, routers } = arrivalRate.sample(now, routerSilentAfterMs);
    const inventory = workers.map((w) => ({ id: w.id, model: heartbeatEveryMs > 0 ? w.reported : w.model }));
    const obs = {
      nowMs: now,
      arrivalsQps,
      queueDepth: queueDepth(),
      workers: inventory,
      current: plan,
      routers,
      demandQps: plannedDemand(),
      signals: ledger.signals,
    };
    const outcome = await (config.control ?? controlTick)(control, obs, tick);
    config.onTick?.(outcome, now);
    if (outcome.plan) adopt(outcome.plan, outcome.swapped.length, outcome.snapshot.demandQps);
  }

  let seconds = 0;
  const allocateEvery = Math.round(allocationPeriodMs(timeScale) / 1_000);
  /** The controller's second: its ledger row, and under the artifact's `tick` an allocation every 50 trace-seconds. */
  async function runSecond(): Promise<void> {
    const signals = ledger.tick(now, queueDepth(), null);
    if (artifactControl && seconds % allocateEvery === 0) {
      result.ticks++;
      const demandQps = plannedDemand() ?? arrivalRate.sample(now, routerSilentAfterMs).qps;
      const inventory = workers.map((w) => ({ id: w.id, model: w.desired }));
      const { plan: next } = await artifactTick(
        { nowMs: now, demandQps, signals, queueDepth: queueDepth(), workers: inventory, current: plan },
        { policyName: config.policyName, policy, profiles: planning, solve: config.solve, sloMs, timeScale },
      );
      if (next) adopt(next, workers.filter((w) => w.desired !== null && next.assignment[w.id] !== w.desired).length, demandQps);
    }
    seconds++;
    const row = ledger.rows[ledger.rows.length - 1];
    if (configSource && row && row.atMs === now && plan) row.configFid = plan.degraded ? worstFid : (plan.expectedFid ?? worstFid);
  }

  /** The load balancer's once-a-second rebuild of its routing tables from the models workers report. */
  function rebuildRouting(): void {
    routing = new Map();
    for (const w of workers) {
      const m = freeSwaps ? w.desired : w.model;
      if (m) routing.set(m, [...(routing.get(m) ?? []), w]);
    }
    // Items held while no worker of their model was listed go out now.
    for (const [m, q] of queues) {
      if (q.length === 0 || !routing.has(m)) continue;
      queues.set(m, []);
      for (const item of q) push(item);
    }
  }

  function arrive(req: SimRequest): void {
    arrivalsSinceReport++;
    routerInFlight++;
    ledger.start(req.index, now);
    agenda.push(req.deadlineAtMs, { kind: "deadline", req });
    // No plan, or the router's admission bound (Little's law on the plan's capacity): refused at once.
    if (!plan || (!drops && refusal(plan, routerInFlight, sloMs))) return finish(req, { latencyMs: 0, outcome: "dropped" });
    const scorer = reference ? { score: () => reference.referenceScores[req.seqIndex] } : config.scorer;
    req.decision = decideRoute(plan, req.prompt, req.id, scorer, artifactThreshold ?? config.threshold);
    if (
      deadlineAware &&
      req.decision.hard &&
      isCascade(plan) &&
      hardFallsBackToLight(sloDeadline(req) - now, {
        lightMs: estimateMs(req.decision.pair.light),
        heavyMs: estimateMs(req.decision.pair.heavy),
      })
    ) {
      // hadis-plus: the heavy model cannot answer in time, the light one can: its image, degraded.
      result.admissions.light++;
      req.decision = { ...req.decision, hard: false, skipJudge: true };
      req.degraded = true;
    } else if (deadlineAware && !req.decision.hard && isCascade(plan) && !req.decision.skipJudge) {
      // hadis-plus's admission: the whole path (light, judge, heavy if rejected) against the time left.
      const { light, heavy } = req.decision.pair;
      const choice = admissionChoice(
        sloDeadline(req) - now,
        { lightMs: estimateMs(light), judgeMs: workerJudge ? 0 : judgeLatencyMs, heavyMs: estimateMs(heavy) },
        heavyHasRoom(heavy),
      );
      result.admissions[choice]++;
      if (choice === "heavy") req.decision = { ...req.decision, hard: true };
      else if (choice === "light") req.lightOnly = true;
    }
    // Under random dispatch every query enters at a light worker, which counts it even when its router sends it on.
    if (req.decision.hard && dispatch && isCascade(plan)) ledger.arrival(plan.pair.light);
    enqueue(req, req.decision.hard ? "heavy" : "light", req.decision.hard ? req.decision.pair.heavy : req.decision.pair.light);
  }

  for (let ev = agenda.pop(); ev; ev = agenda.pop()) {
    now = ev.atMs;
    const e = ev.event;
    switch (e.kind) {
      case "arrival":
        arrive(e.req);
        break;
      case "deadline":
        if (!e.req.ended) finish(e.req, drops ? { latencyMs: null, outcome: "dropped" } : { latencyMs: null, outcome: "timedOut" });
        break;
      case "lightBeforeDeadline":
        if (!e.req.ended) {
          result.lightFallbacks++;
          serve(e.req, e.req.lightModel!, Routes.light);
        }
        break;
      case "judged":
        if (!e.req.ended) await judge(e.req);
        break;
      case "batchDone": {
        const w = e.worker;
        const batch = w.batch;
        const ran = w.batchModel!;
        w.busy = false;
        w.batch = [];
        for (const item of batch) deliver(item, ran, w.batchMs);
        advance(w);
        break;
      }
      case "unloaded":
        e.worker.unloading = null;
        startLoad(e.worker, e.from);
        break;
      case "beat":
        // WorkerAgent.status(): the loaded model, or the one still unloading; none while loading.
        for (const w of workers) w.reported = w.model ?? w.unloading;
        if (running()) agenda.push(now + heartbeatEveryMs, { kind: "beat" });
        break;
      case "loaded": {
        const w = e.worker;
        w.busy = false;
        w.model = e.to;
        if (e.from) w.swaps++;
        result.loads.push({ atMs: now, workerId: w.id, model: e.to });
        advance(w);
        break;
      }
      case "stats":
        arrivalRate.report("sim-router", arrivalsSinceReport, now - lastReportMs, now);
        arrivalsSinceReport = 0;
        lastReportMs = now;
        if (running()) agenda.push(now + statsEveryMs, { kind: "stats" });
        break;
      case "tick":
        await runTick();
        if (running()) agenda.push(now + tickMs, { kind: "tick" });
        break;
      case "second":
        await runSecond();
        // The controller ticks until every outcome is in its rows; under the artifact's scoring it
        // stops soon after the last query is sent, as run_E1.sh stops every node at TRACE ENDED.
        if (on("scoring") ? now < lastArrivalMs + ARTIFACT_STOP_AFTER_TRACE_MS : running() || ledger.unresolved > 0)
          agenda.push(now + 1_000, { kind: "second" });
        break;
      case "routing":
        rebuildRouting();
        if (running()) agenda.push(now + 1_000, { kind: "routing" });
        break;
    }
  }
  result.swaps = workers.reduce((s, w) => s + w.swaps, 0);
  for (const [m, q] of queues) result.leftInQueue[m] = q.length;
  for (const w of workers)
    if (w.desired && w.queue.length > 0) result.leftInQueue[w.desired] = (result.leftInQueue[w.desired] ?? 0) + w.queue.length;
  result.unfinished = requests.filter((r) => !r.record).length;
  result.records = requests.map((r) => r.record ?? { arrivalMs: r.arrivalMs, latencyMs: null, outcome: "dropped" });
  result.rows = ledger.rows;
  return result;
}

export { moveTarget };
