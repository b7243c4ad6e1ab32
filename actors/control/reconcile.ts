/**
 * One control tick of the resource manager, as a pure function: snapshot → policy → assignment
 * (fewest moves) → damping → the plan to publish, or null when nothing should change. The
 * service and the simulator both run it; time and I/O are passed in.
 */
import type { Plan } from "../../contracts/messages.ts";
import { withBatchCaps, withoutModels, type ProfileSet } from "../profile/profile-set.ts";
import { assignWorkers, holdingOf, swappedWorkers } from "../planner/assignment.ts";
import { dampPlan, planShortfall, type DampingOptions, type DampingVerdict } from "../planner/damping.ts";
import { decisionToPlan, modelCapacityQps, type PlanDecision } from "../planner/decision.ts";
import type { PlannerPolicy } from "../planner/policies.ts";
import type { SolveFn } from "../planner/solver.ts";
import type { ArtifactSignals } from "../artifact/signals.ts";
import { Ewma, queueDelayMs, type PlannerSnapshot, type WorkerInventoryItem } from "../planner/snapshot.ts";

/** What the control loop remembers between ticks. */
export interface ControlState {
  demand: Ewma;
  /** Last time each worker was told to swap, ms. */
  lastSwapAtMs: Record<string, number>;
  /** The demand the last tick read, qps (the next tick's `previousDemandQps`). */
  lastDemandQps?: number;
}

/**
 * A fresh control state; `halfLifeMs` is the demand EWMA's half-life. Given the plan in force
 * (a restarted manager), it resumes from it: demand from the plan's estimate, and every
 * assigned worker treated as swapped when the plan was issued, so dwell damping holds.
 */
export function newControlState(halfLifeMs: number, resume?: Plan | null, nowMs = 0): ControlState {
  const state: ControlState = { demand: new Ewma(halfLifeMs), lastSwapAtMs: {} };
  if (resume) {
    if (resume.demandQps !== undefined) {
      state.demand.update(resume.demandQps, nowMs);
      state.lastDemandQps = resume.demandQps;
    }
    for (const id of Object.keys(resume.assignment)) state.lastSwapAtMs[id] = resume.issuedAtMs;
  }
  return state;
}

/**
 * Notes a plan that followed `before` in force (another manager's included): each worker it moves
 * starts its dwell when it was issued, unless a later swap is already noted.
 */
export function noteSwaps(state: ControlState, before: Plan, plan: Plan): void {
  for (const [id, model] of Object.entries(plan.assignment)) {
    if (before.assignment[id] !== model) state.lastSwapAtMs[id] = Math.max(state.lastSwapAtMs[id] ?? 0, plan.issuedAtMs);
  }
}

/** Largest demand (qps) a plan carries: the tightest model's capacity over the share it receives. */
export function planCapacityQps(plan: Plan, profiles: ProfileSet): number {
  const capacity = modelCapacityQps(plan, profiles);
  const shares: [string, number][] =
    plan.pair.light === plan.pair.heavy
      ? [[plan.pair.light, 1]]
      : [
          [plan.pair.light, 1 - plan.routerThreshold],
          [plan.pair.heavy, plan.heavyShare],
        ];
  let best = Number.POSITIVE_INFINITY;
  for (const [m, share] of shares) if (share > 0) best = Math.min(best, (capacity[m] ?? 0) / share);
  return Number.isFinite(best) ? best : 0;
}

/** What one tick observes. */
export interface TickObservation {
  nowMs: number;
  /** Arrivals per second since the last tick, summed over routers. */
  arrivalsQps: number;
  /** Items waiting per model queue. */
  queueDepth: Record<string, number>;
  /** Live workers and what they hold. */
  workers: WorkerInventoryItem[];
  current: Plan | null;
  /** Routers heard from (they share the admission bound). */
  routers?: number;
  /** Models that failed (to load, or batch after batch) on several workers: planned without while they are listed. */
  unavailableModels?: readonly string[];
  /** Workers left out of `workers` because a model failed on them alone (reported, not planned). */
  benchedWorkers?: readonly string[];
  /** The largest batch of some models, as their workers found (bigger ones ran only in parts): planned at most. */
  batchCaps?: ReadonlyMap<string, number>;
  /** Demand to plan with, given by the caller (the artifact's in-flight signal) instead of the EWMA of `arrivalsQps`. */
  demandQps?: number;
  /** The artifact controller's queue and arrival EWMAs, for the artifact's allocators. */
  signals?: ArtifactSignals;
  /** Workers have queues of their own (the artifact's `dispatch`). */
  perWorkerQueues?: boolean;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** Fixed inputs of the loop. */
export interface TickConfig {
  policyName: string;
  policy: PlannerPolicy;
  profiles: ProfileSet;
  solve: SolveFn;
  sloMs: number;
  timeScale: number;
  /** Multiplies Little's-law queue delays (headroom for bursts). */
  queueSafety: number;
  /** Requests in flight allowed beyond capacity × SLO (default 0.8: a little under the Little bound, since batches rarely run full) before routers refuse. */
  admissionHeadroom?: number;
  damping?: DampingOptions;
  /**
   * The policy's models are fixed by its configuration (`static`, the baselines built on named
   * models): it plans on the whole pool whatever failed; failures only bench workers.
   */
  fixedModels?: boolean;
}

/** What a tick decided and why. */
export interface TickOutcome {
  /** The plan to publish, or null to keep the one in force. */
  plan: Plan | null;
  snapshot: PlannerSnapshot;
  decision: PlanDecision;
  verdict: DampingVerdict | null;
  /** Workers the new plan moves to another model. */
  swapped: string[];
  /** Why nothing changed, when `plan` is null. */
  held?: string;
  /** What failed loads kept out of this tick: models (out of the pool) and benched workers. */
  excluded: { models: string[]; workers: string[] };
}

const POLICY_ROUTER_MODE: Record<string, Plan["routerMode"]> = { proteus: "random" };

function sameConfiguration(a: Plan, b: Plan): boolean {
  const key = (p: Plan) =>
    JSON.stringify([
      p.policy,
      p.pair,
      p.routerThreshold,
      p.routerMode ?? "difficulty",
      p.discThreshold,
      p.sloMs,
      p.degraded ?? 0,
      p.admission?.routers ?? 1,
      Object.entries(p.models).sort(([x], [y]) => (x < y ? -1 : 1)),
      Object.entries(p.assignment).sort(([x], [y]) => (x < y ? -1 : 1)),
    ]);
  return key(a) === key(b);
}

/** Per-model arrival rate under a plan: light gets the non-routed share, heavy the heavy share. */
function modelArrivalQps(plan: Plan | null, demandQps: number): Record<string, number> {
  if (!plan) return {};
  const { light, heavy } = plan.pair;
  if (light === heavy) return { [light]: demandQps };
  return { [light]: demandQps * (1 - plan.routerThreshold), [heavy]: demandQps * plan.heavyShare };
}

/**
 * Queueing delay per model by Little's law (queue ÷ arrival rate) × safety. A queue left over
 * from a swap while arrivals are few drains at service speed, not at the arrival rate, so the
 * rate is floored at half the model's capacity: otherwise two items queued at 0.1 qps would
 * read as a 20 s wait and the planner would flee to the cheapest pair.
 */
export function estimateQueueDelays(
  depth: Record<string, number>,
  arrivals: Record<string, number>,
  capacity: Record<string, number>,
  safety: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [model, n] of Object.entries(depth)) {
    out[model] = queueDelayMs(n, Math.max(arrivals[model] ?? 0, 0.5 * (capacity[model] ?? 0)), safety);
  }
  return out;
}

/**
 * The configuration of a plan on the workers alive now, as a decision: each model keeps the
 * live workers it has (a model whose last worker died has none, so its work moves), new workers
 * replace the dead first, and any left join the heavy model.
 */
function configurationOf(plan: Plan, alive: WorkerInventoryItem[]): PlanDecision {
  const counts: Record<string, number> = Object.fromEntries(Object.keys(plan.models).map((m) => [m, 0]));
  let spare = 0;
  for (const w of alive) {
    const m = plan.assignment[w.id];
    if (m !== undefined && m in counts) counts[m]++;
    else spare++;
  }
  for (const [m, a] of Object.entries(plan.models)) {
    const give = Math.min(spare, Math.max(0, a.workers - counts[m]));
    counts[m] += give;
    spare -= give;
  }
  counts[plan.pair.heavy] = (counts[plan.pair.heavy] ?? 0) + spare;
  return {
    pair: plan.pair,
    routerThreshold: plan.routerThreshold,
    discThreshold: plan.discThreshold,
    heavyShare: plan.heavyShare,
    expectedFid: plan.expectedFid ?? Number.NaN,
    models: Object.fromEntries(Object.entries(counts).map(([m, n]) => [m, { workers: n, batchSize: plan.models[m]?.batchSize ?? 1 }])),
    reason: plan.reason,
    degraded: plan.degraded ?? 0,
  };
}

/** Runs one control tick. Never throws for a policy failure: the outcome says what was held. */
export async function controlTick(state: ControlState, obs: TickObservation, config: TickConfig): Promise<TickOutcome> {
  const demandQps = obs.demandQps ?? state.demand.update(obs.arrivalsQps, obs.nowMs);
  const delays = estimateQueueDelays(
    obs.queueDepth,
    modelArrivalQps(obs.current, demandQps),
    modelCapacityQps(obs.current, config.profiles),
    config.queueSafety,
  );
  const snapshot: PlannerSnapshot = {
    nowMs: obs.nowMs,
    demandQps,
    queueDepth: obs.queueDepth,
    queueDelayMs: delays,
    // What each worker will hold under the plan in force (a swap under way counts as done, as
    // `assignWorkers` counts it), else what its heartbeat says: the planner's swap costs and
    // its keep-workers-where-they-are spread read the same holdings the assignment does.
    workers: obs.workers.map((w) => ({ ...w, model: holdingOf(w, obs.current?.assignment) })),
    current: obs.current,
    ...(state.lastDemandQps !== undefined ? { previousDemandQps: state.lastDemandQps } : {}),
    sloMs: config.sloMs,
    timeScale: config.timeScale,
    ...(obs.signals ? { signals: obs.signals } : {}),
    ...(obs.perWorkerQueues ? { perWorkerQueues: true } : {}),
  };
  state.lastDemandQps = demandQps;
  const caps = obs.batchCaps ?? new Map<string, number>();
  const pool = withBatchCaps(
    config.fixedModels ? config.profiles : withoutModels(config.profiles, new Set(obs.unavailableModels ?? [])),
    caps,
  );
  const left = config.profiles.models.filter((m) => !pool.byName.has(m.name)).map((m) => m.name);
  /** A decision with no batch above its model's cap (policies that choose batches already keep to them; a configuration does not). */
  const withinCaps = (d: PlanDecision): PlanDecision => ({
    ...d,
    models: Object.fromEntries(
      Object.entries(d.models).map(([m, a]) => [m, { ...a, batchSize: Math.min(a.batchSize, caps.get(m) ?? a.batchSize) }]),
    ),
  });
  let decision = withinCaps(await config.policy(snapshot, pool, config.solve));
  const without = left.length > 0 ? `; without ${left.join(", ")} (failing on workers)` : "";
  const capped = [...caps].filter(([m]) => (decision.models[m]?.workers ?? 0) > 0).map(([m, n]) => `${m} ≤ ${n}`);
  const suffix = without + (capped.length > 0 ? `; batches ${capped.join(", ")} (workers' caps)` : "");
  if (suffix) decision = { ...decision, reason: `${decision.reason}${suffix}` };
  const excluded = { models: left, workers: [...(obs.benchedWorkers ?? [])] };
  const outcome = (plan: Plan | null, verdict: DampingVerdict | null, swapped: string[], held?: string): TickOutcome => ({
    plan,
    snapshot,
    decision,
    verdict,
    swapped,
    held,
    excluded,
  });
  const live = new Set(obs.workers.map((w) => w.id));
  // A worker gone is forgotten (ids are fresh with every worker process: kept, they piled up for good).
  for (const id of Object.keys(state.lastSwapAtMs)) if (!live.has(id)) delete state.lastSwapAtMs[id];
  const current = obs.current;
  /** The plan in force gives workers to a model that is failing: it is replaced, whatever damping says. */
  const strandsWork = current !== null && Object.entries(current.models).some(([m, a]) => a.workers > 0 && !pool.byName.has(m));
  /** The plan in force runs a batch above its workers' cap: kept (if damping keeps it), but within the caps. */
  const overCap =
    current !== null &&
    Object.entries(current.models).some(([m, a]) => a.workers > 0 && a.batchSize > (caps.get(m) ?? Number.POSITIVE_INFINITY));
  /** Workers that died or joined since the plan in force: reflected at once, whatever else holds. */
  const inventoryChanged =
    current !== null &&
    (Object.keys(current.assignment).some((id) => !live.has(id)) || obs.workers.some((w) => !(w.id in current.assignment)));
  /** The plan in force as it runs now: its configuration on the workers alive, within the caps. */
  const inForce = current ? withinCaps(configurationOf(current, obs.workers)) : null;
  /** That, as a plan: what shortfall and damping judge (not the plan as written, with its dead workers and capped batches). */
  const running = current && inForce ? { ...current, models: inForce.models } : null;
  /** The plan in force, run as it is now, leaves a model of its pair without a worker (its last one died)... */
  const pairUnserved = running !== null && [running.pair.light, running.pair.heavy].some((m) => (running.models[m]?.workers ?? 0) === 0);
  /** ...or falls short of the demand. */
  const runningShort = running !== null && (pairUnserved || planShortfall(running, demandQps, config.profiles, delays) !== null);
  if (current && inForce && (decision.solverStatus === "Error" || decision.solverStatus === "Timeout")) {
    // The configuration in force stays, on the workers alive now; unless that leaves a model of
    // its pair unserved or no longer covers the demand: then the degraded decision the policy
    // gave (every worker on the lightest model) goes on to damping, which replaces such a plan.
    if (!runningShort && !strandsWork) {
      if (!inventoryChanged && !overCap) return outcome(null, null, [], `solver ${decision.solverStatus}: keeping epoch ${current.epoch}`);
      decision = {
        ...inForce,
        reason: `solver ${decision.solverStatus}: configuration of epoch ${current.epoch} on the workers alive now${suffix}`,
        solverStatus: decision.solverStatus,
      };
    }
  }

  const held = Object.fromEntries(Object.entries(current?.assignment ?? {}).filter(([id]) => live.has(id)));
  /** The wire plan of a decision, its workers assigned moving as few as possible. */
  const planOf = (d: PlanDecision): Plan => {
    const counts = Object.fromEntries(Object.entries(d.models).map(([m, a]) => [m, a.workers]));
    const plan = decisionToPlan(d, {
      epoch: (current?.epoch ?? 0) + 1,
      policy: config.policyName,
      issuedAtMs: obs.nowMs,
      sloMs: config.sloMs,
      timeScale: config.timeScale,
      assignment: assignWorkers(obs.workers, held, counts, { lastSwapAtMs: state.lastSwapAtMs }),
    });
    const routerMode = POLICY_ROUTER_MODE[config.policyName];
    if (routerMode && !plan.routerMode) plan.routerMode = routerMode;
    plan.demandQps = round2(demandQps);
    plan.capacityQps = round2(planCapacityQps(plan, config.profiles));
    plan.admission = { routers: Math.max(1, obs.routers ?? 1), headroom: config.admissionHeadroom ?? 0.8 };
    return plan;
  };
  /** Adopts `plan`: every worker whose model it changes (joiners included) starts its dwell now. */
  const adopt = (plan: Plan, verdict: DampingVerdict | null): TickOutcome => {
    const swapped = swappedWorkers(held, plan.assignment);
    for (const w of obs.workers)
      if (plan.assignment[w.id] !== undefined && plan.assignment[w.id] !== holdingOf(w, held)) state.lastSwapAtMs[w.id] = obs.nowMs;
    return outcome(plan, verdict, swapped);
  };
  const candidate = planOf(decision);
  if (current && sameConfiguration(current, candidate)) return outcome(null, null, [], "unchanged");
  if (strandsWork) return adopt(candidate, null);

  const verdict = dampPlan({
    current: running,
    candidate,
    lastSwapAtMs: state.lastSwapAtMs,
    nowMs: obs.nowMs,
    demandQps,
    queueDelayMs: delays,
    profiles: config.profiles,
    options: config.damping,
  });
  if (verdict.adopt) return adopt(candidate, verdict);
  if (!inventoryChanged && !overCap) return outcome(null, verdict, [], verdict.reason);
  // Damping holds the new configuration, but the workers changed (or its batches are above the
  // caps): the configuration in force, on the workers alive now (a dead worker's share re-homed,
  // a joiner given work) and within the caps, not the held one.
  // Unless that leaves a model of the pair without a worker (its last one died): then the
  // policy's configuration for the workers alive now, which gives every model it uses one.
  if (pairUnserved) return adopt(candidate, verdict);
  return adopt(
    planOf({ ...inForce!, reason: `${verdict.reason}; configuration of epoch ${current!.epoch} on the workers alive now${suffix}` }),
    verdict,
  );
}
