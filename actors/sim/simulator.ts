/**
 * The profile-driven serving system as a deterministic discrete-event simulation: no NATS, a
 * simulated clock, and the live system's own pieces — `controlTick` (policy → MILP → assignment
 * → damping), `decideRoute` with the router's scorer and threshold, the profile judge, per-model
 * FIFO queues and workers with the batch, expiry and swap semantics of `WorkerAgent`.
 *
 * The request lifecycle mirrors `RequestMachine` in a lean event loop (route → light → judge →
 * heavy, deadline from arrival) rather than running one XState actor per request; the live
 * router's transport details that change outcomes are mirrored too (see `applyPlan`).
 */
import { moveTarget } from "../routing/move-target.ts";
import type { Plan, Route } from "../../contracts/messages.ts";
import { Routes } from "../../contracts/messages.ts";
import { ArrivalRate } from "../control/arrivals.ts";
import { controlTick, newControlState, type TickConfig, type TickOutcome } from "../control/reconcile.ts";
import type { ProfileJudge } from "../judge/profile-judge.ts";
import { getPolicy } from "../planner/policies.ts";
import type { SolveFn } from "../planner/solver.ts";
import { batchLatencyMs, referenceIndexFor, type ProfileSet } from "../profile/profile-set.ts";
import type { Arrival } from "../profile/reference.ts";
import type { DifficultyScorer, HardnessThreshold } from "../routing/difficulty.ts";
import { decideRoute } from "../routing/route-policy.ts";
import { refusal } from "../routing/admission.ts";
import { GenerationFloor } from "../routing/generation-floor.ts";
import { acceptsLight } from "../judge/verdict.ts";
import type { RouteDecision } from "../request/types.ts";
import { REPLY_MARGIN_MS } from "../request/types.ts";
import { EventQueue } from "./event-queue.ts";
import type { PlanMark, RequestRecord } from "./scoring.ts";

/** Inputs of one simulated run. */
export interface SimConfig {
  policyName: string;
  profiles: ProfileSet;
  solve: SolveFn;
  /** The router's difficulty scorer and (fresh, stateful) threshold. */
  scorer: DifficultyScorer;
  threshold: HardnessThreshold;
  /** Profile judge; its latency option is ignored (`judgeLatencyMs` is used). */
  judge: Pick<ProfileJudge, "score" | "thresholdFor">;
  arrivals: readonly Arrival[];
  /** Prompt text by prompt index. */
  prompts: readonly string[];
  workers: number;
  /** Latency objective, ms (already time-scaled). */
  sloMs: number;
  timeScale: number;
  /** Seeds request ids (Proteus's random split hashes them). */
  seed: number;
  /** Control tick, ms (live default: max(500, 20 s × time scale)). */
  tickMs?: number;
  /** Demand EWMA half-life, ms (live default: max(1 s, 20 s × time scale)). */
  demandHalfLifeMs?: number;
  /** Little's-law safety factor (live: 1.5). */
  queueSafety?: number;
  /** Router stats interval, ms: the manager sees arrivals only when a router reports (live: 1 s). */
  statsEveryMs?: number;
  /**
   * Worker heartbeat interval, ms: the manager sees each worker's model as of its last heartbeat
   * (live: 1 s, every worker of a process at once). 0: it sees them as they are.
   */
  heartbeatEveryMs?: number;
  /** The system starts this long before the trace's time 0 (first tick 250 ms after start). */
  warmupMs?: number;
  /** Judge latency, ms (live: pool judge latency × time scale). */
  judgeLatencyMs?: number;
  /**
   * A request's queued items leave the queues when it ends (default true), as live: the router
   * removes an ended request's item from the stream, and the manager purges a model left without
   * workers. `false` replays the earlier behaviour, where such items stayed and read as load.
   */
  purgeFinished?: boolean;
  /** The manager's control tick (default `controlTick`); tests script plans with a fake. */
  control?: typeof controlTick;
  /** Called after every control tick (diagnostics), like the manager's `onTick`. */
  onTick?: (outcome: TickOutcome, nowMs: number) => void;
}

/** A plan adopted during the run. */
export interface SimPlanChange extends PlanMark {
  epoch: number;
  pair: Plan["pair"];
  routerThreshold: number;
  discThreshold: number;
  models: Plan["models"];
  degraded: number;
  swapped: number;
  demandQps: number;
  reason: string;
}

/** What a run produced. */
export interface SimResult {
  records: RequestRecord[];
  plans: SimPlanChange[];
  /** Completed worker swaps (a loaded model replaced by another). */
  swaps: number;
  /** Model loads completed, in order (a worker's first load, or the load of a swap). */
  loads: { atMs: number; workerId: string; model: string }[];
  ticks: number;
  /** Work items dropped by workers because their deadline had passed. */
  expiredDrops: number;
  /** Items executed for requests already answered or expired (duplicates after a move, late items). */
  wastedItems: number;
  /** Items moved to another model's queue by a plan change. */
  movedItems: number;
  /** Light images the judge rejected, served because the time left could not fit the heavy model (the live router's `GenerationFloor`). */
  escalationsSkipped: number;
  /** Escalated requests served their light image as the deadline neared, the heavy image not come. */
  lightFallbacks: number;
  /** Items left in each model's queue when the run ended (stale work no worker pulled). */
  leftInQueue: Record<string, number>;
  /** Requests with no outcome when the agenda ran dry (recorded as dropped); 0 unless the simulator has a bug. */
  unfinished: number;
}

type Stage = "light" | "heavy";

interface SimRequest {
  index: number;
  id: string;
  arrivalMs: number;
  prompt: string;
  refIndex: number;
  deadlineAtMs: number;
  decision?: RouteDecision;
  /** The stage whose generation the router waits for (one outstanding generation per request). */
  waiting: Stage | null;
  /** The model of the item the router waits on (its pending entry's model; a move updates it). */
  waitingModel?: string;
  /** Light image made (the model that made it). */
  lightModel?: string;
  ended: boolean;
  record?: RequestRecord;
}

interface WorkItem {
  req: SimRequest;
  stage: Stage;
  model: string;
  deadlineAtMs: number;
}

interface SimWorker {
  id: string;
  model: string | null;
  desired: string | null;
  batchSize: number;
  /** Executing a batch or swapping. */
  busy: boolean;
  /** Items of the batch in execution. */
  batch: WorkItem[];
  /** Execution time of that batch, ms. */
  batchMs: number;
  swaps: number;
  /** The model being unloaded (a live worker reports it until the unload ends). */
  unloading: string | null;
  /** The model its last heartbeat reported: what the manager sees. */
  reported: string | null;
}

type SimEvent =
  | { kind: "arrival"; req: SimRequest }
  | { kind: "deadline"; req: SimRequest }
  /** An escalated request's light image goes out this close to the deadline when the heavy one has not come (`REPLY_MARGIN_MS`). */
  | { kind: "lightBeforeDeadline"; req: SimRequest }
  | { kind: "judged"; req: SimRequest }
  | { kind: "batchDone"; worker: SimWorker }
  | { kind: "unloaded"; worker: SimWorker; from: string }
  | { kind: "loaded"; worker: SimWorker; from: string | null; to: string }
  | { kind: "stats" }
  | { kind: "beat" }
  | { kind: "tick" };

/** Runs one policy over a trace; deterministic for the same inputs and seed. */
export async function simulate(config: SimConfig): Promise<SimResult> {
  const { profiles, timeScale, sloMs } = config;
  const tickMs = config.tickMs ?? Math.max(500, 20_000 * timeScale);
  const statsEveryMs = config.statsEveryMs ?? 1_000;
  const warmupMs = config.warmupMs ?? 2 * tickMs;
  const judgeLatencyMs = config.judgeLatencyMs ?? profiles.pool.judge.latencyMs * timeScale;
  const tick: TickConfig = {
    policyName: config.policyName,
    policy: getPolicy(config.policyName),
    profiles,
    solve: config.solve,
    sloMs,
    timeScale,
    queueSafety: config.queueSafety ?? 1.5,
  };
  const control = newControlState(config.demandHalfLifeMs ?? Math.max(1_000, 20_000 * timeScale));
  const agenda = new EventQueue<SimEvent>();
  const queues = new Map<string, WorkItem[]>(profiles.models.map((m) => [m.name, []]));
  const workers: SimWorker[] = Array.from({ length: config.workers }, (_, i) => ({
    id: `w-${String(i).padStart(2, "0")}`,
    model: null,
    desired: null,
    batchSize: 1,
    busy: false,
    batch: [],
    batchMs: 0,
    swaps: 0,
    unloading: null,
    reported: null,
  }));
  /** Idle workers waiting on a model's queue, in the order they started waiting (pull order). */
  const waitingPulls = new Map<string, SimWorker[]>(profiles.models.map((m) => [m.name, []]));
  const result: SimResult = { records: [], plans: [], swaps: 0, loads: [], ticks: 0, expiredDrops: 0, wastedItems: 0, movedItems: 0, escalationsSkipped: 0, lightFallbacks: 0, leftInQueue: {}, unfinished: 0 };
  /** What the live router learns from results: each model's fastest recent generation. */
  const floor = new GenerationFloor();
  let plan: Plan | null = null;
  let now = -warmupMs;
  let arrivalsSinceReport = 0;
  let lastReportMs = now;
  // The manager's demand sample (live: services/resource-manager); one router here.
  const arrivalRate = new ArrivalRate();
  const routerSilentAfterMs = Math.max(3_000, 3 * statsEveryMs);
  let open = config.arrivals.length;
  /** Requests the router holds (arrived, not answered): what its admission bound counts. */
  let routerInFlight = 0;

  const requests: SimRequest[] = config.arrivals.map((a, index) => {
    const prompt = config.prompts[a.promptIdx % config.prompts.length];
    return {
      index,
      id: `${config.seed}-${index}`,
      arrivalMs: a.atMs,
      prompt,
      refIndex: referenceIndexFor(profiles, prompt).index,
      deadlineAtMs: a.atMs + sloMs,
      waiting: null,
      ended: false,
    };
  });
  for (const req of requests) agenda.push(req.arrivalMs, { kind: "arrival", req });
  // Every request has ended by its deadline; the clock stops after the last one, so a request
  // left open by a bug shows as `unfinished` instead of ticking forever.
  const lastDeadlineMs = requests.reduce((m, r) => Math.max(m, r.deadlineAtMs), now);
  const running = () => open > 0 && now < lastDeadlineMs;
  agenda.push(now + 250, { kind: "tick" });
  agenda.push(now + statsEveryMs, { kind: "stats" });
  const heartbeatEveryMs = config.heartbeatEveryMs ?? 1_000;
  // Half a beat before the first tick: on average what a live manager's view lags by.
  if (heartbeatEveryMs > 0) agenda.push(now + 250 - heartbeatEveryMs / 2 + heartbeatEveryMs, { kind: "beat" });

  const scoreOf = (model: string, req: SimRequest) => profiles.reference.scores.get(model)?.[req.refIndex];

  function finish(req: SimRequest, record: Omit<RequestRecord, "arrivalMs">): void {
    // A request machine ends once; a second end would be a simulator bug, not an outcome.
    if (req.ended) throw new Error(`request ${req.id} ended twice (${req.record!.outcome}, then ${record.outcome})`);
    req.ended = true;
    req.waiting = null;
    req.record = { arrivalMs: req.arrivalMs, ...record };
    open--;
    routerInFlight--;
    if (config.purgeFinished ?? true) {
      for (const [m, q] of queues) if (q.some((it) => it.req === req)) queues.set(m, q.filter((it) => it.req !== req));
    }
  }

  function serve(req: SimRequest, model: string, route: Route): void {
    const models = route === Routes.light ? { light: model } : route === Routes.heavy ? { heavy: model } : { light: req.lightModel, heavy: model };
    finish(req, { latencyMs: now - req.arrivalMs, outcome: "served", route, models, servedModel: model, servedScore: scoreOf(model, req) });
  }

  /** Queues work as the router's generate actor does: to the model playing the stage now if the decided one has no workers. */
  function enqueue(req: SimRequest, stage: Stage, decided: string): void {
    const model = (plan && moveTarget(plan, stage, decided)) ?? decided;
    req.waiting = stage;
    req.waitingModel = model;
    push({ req, stage, model, deadlineAtMs: req.deadlineAtMs });
  }

  function push(item: WorkItem): void {
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

  function pull(w: SimWorker): void {
    const model = w.model!;
    const queue = queues.get(model)!;
    for (;;) {
      if (queue.length === 0) {
        const idle = waitingPulls.get(model)!;
        if (!idle.includes(w)) idle.push(w);
        return;
      }
      const taken = queue.splice(0, w.batchSize);
      // Expired items are dropped unexecuted; they still took their place in the pull.
      const batch = taken.filter((it) => it.deadlineAtMs > now);
      result.expiredDrops += taken.length - batch.length;
      if (batch.length === 0) continue;
      const idle = waitingPulls.get(model)!;
      const at = idle.indexOf(w);
      if (at >= 0) idle.splice(at, 1);
      w.busy = true;
      w.batch = batch;
      w.batchMs = batchLatencyMs(profiles.byName.get(model)!, batch.length, timeScale);
      agenda.push(now + w.batchMs, { kind: "batchDone", worker: w });
      return;
    }
  }

  /** WorkerAgent.swap: unload first; the model to load is chosen when the unload is done. */
  function startSwap(w: SimWorker): void {
    const from = w.model;
    w.busy = true;
    w.model = null;
    if (!from) return startLoad(w, null);
    const idle = waitingPulls.get(from)!;
    const at = idle.indexOf(w);
    if (at >= 0) idle.splice(at, 1);
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
   * A worker's result reaches the router (PendingWork.deliver): the first result for the stage the
   * request waits on wins, whatever model made it (a moved copy not yet taken is removed); a late
   * copy of another stage's work is dropped.
   */
  function deliver(item: WorkItem, execMs: number): void {
    const req = item.req;
    if (req.ended || req.waiting !== item.stage) {
      result.wastedItems++;
      return;
    }
    floor.observe(item.model, execMs); // the live router learns from the results it takes
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
    if (req.decision!.skipJudge) return serve(req, item.model, Routes.light);
    agenda.push(now + judgeLatencyMs, { kind: "judged", req });
  }

  /** A new plan: workers follow it, and waiting work on models left without workers moves (the live router's rescue). */
  function applyPlan(next: Plan): void {
    plan = next;
    for (const w of workers) {
      const model = next.assignment[w.id] ?? null;
      w.batchSize = model ? Math.max(1, next.models[model]?.batchSize ?? 1) : 1;
      w.desired = model;
    }
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
    for (const w of workers) advance(w);
  }

  /** Whether the router still waits on this item (the live router moves only its pending entry). */
  function isWaitedOn(item: WorkItem): boolean {
    return !item.req.ended && item.req.waiting === item.stage && item.req.waitingModel === item.model;
  }

  async function runTick(): Promise<void> {
    result.ticks++;
    const queueDepth: Record<string, number> = {};
    for (const [m, q] of queues) queueDepth[m] = q.length;
    const { qps: arrivalsQps, routers } = arrivalRate.sample(now, routerSilentAfterMs);
    const inventory = workers.map((w) => ({ id: w.id, model: heartbeatEveryMs > 0 ? w.reported : w.model }));
    const outcome = await (config.control ?? controlTick)(control, { nowMs: now, arrivalsQps, queueDepth, workers: inventory, current: plan, routers }, tick);
    config.onTick?.(outcome, now);
    if (!outcome.plan) return;
    const p = outcome.plan;
    result.plans.push({
      atMs: now,
      epoch: p.epoch,
      expectedFid: p.expectedFid,
      pair: p.pair,
      routerThreshold: p.routerThreshold,
      discThreshold: p.discThreshold,
      models: p.models,
      degraded: p.degraded ?? 0,
      swapped: outcome.swapped.length,
      demandQps: outcome.snapshot.demandQps,
      reason: p.reason,
    });
    applyPlan(p);
  }

  for (let ev = agenda.pop(); ev; ev = agenda.pop()) {
    now = ev.atMs;
    const e = ev.event;
    switch (e.kind) {
      case "arrival": {
        const req = e.req;
        arrivalsSinceReport++;
        routerInFlight++;
        agenda.push(req.deadlineAtMs, { kind: "deadline", req });
        // No plan, or the router's admission bound (Little's law on the plan's capacity): refused at once.
        if (!plan || refusal(plan, routerInFlight, sloMs)) {
          finish(req, { latencyMs: 0, outcome: "dropped" });
          break;
        }
        req.decision = decideRoute(plan, req.prompt, req.id, config.scorer, config.threshold);
        enqueue(req, req.decision.hard ? "heavy" : "light", req.decision.hard ? req.decision.pair.heavy : req.decision.pair.light);
        break;
      }
      case "deadline":
        if (!e.req.ended) finish(e.req, { latencyMs: null, outcome: "timedOut" });
        break;
      case "lightBeforeDeadline":
        if (!e.req.ended) {
          result.lightFallbacks++;
          serve(e.req, e.req.lightModel!, Routes.light);
        }
        break;
      case "judged": {
        const req = e.req;
        if (req.ended) break;
        // The discriminator judges against the threshold of the plan in force now.
        const share = (plan as Plan | null)?.discThreshold ?? 0;
        const [score] = await config.judge.score([{ prompt: req.prompt, model: req.lightModel!, image: new Uint8Array(0) }]);
        if (acceptsLight(score, config.judge.thresholdFor(req.lightModel!, share), share)) serve(req, req.lightModel!, Routes.light);
        else if (req.deadlineAtMs - now >= floor.floorMs(req.decision!.pair.heavy)) {
          enqueue(req, "heavy", req.decision!.pair.heavy);
          agenda.push(Math.max(now, req.deadlineAtMs - REPLY_MARGIN_MS), { kind: "lightBeforeDeadline", req });
        } else {
          // The live router's escalation check: the heavy model cannot answer in the time left.
          result.escalationsSkipped++;
          serve(req, req.lightModel!, Routes.light);
        }
        break;
      }
      case "batchDone": {
        const w = e.worker;
        const batch = w.batch;
        w.busy = false;
        w.batch = [];
        for (const item of batch) deliver(item, w.batchMs);
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
    }
  }
  result.swaps = workers.reduce((s, w) => s + w.swaps, 0);
  for (const [m, q] of queues) result.leftInQueue[m] = q.length;
  result.unfinished = requests.filter((r) => !r.record).length;
  result.records = requests.map((r) => r.record ?? { arrivalMs: r.arrivalMs, latencyMs: null, outcome: "dropped" });
  return result;
}


export { moveTarget };
