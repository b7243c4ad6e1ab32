/**
 * Swap damping: whether a candidate plan that moves workers is worth adopting now. Pure —
 * plans, per-worker last swap times and the time are passed in.
 *
 * Rule, in order: the first plan, a plan that moves no worker, a feasible plan replacing a
 * degraded one, and any plan replacing one that no longer covers demand or the SLO are
 * always adopted, except that a plan short only by its queues (capacity enough, a backlog)
 * is kept while the workers the candidate moves dwell. Otherwise every moved worker must have
 * dwelt `minDwellMs` since its last swap, and the FID gain must pay for the swap: gain ≥
 * minFidGain + fidPerLostCapacity × (GPU time lost to unload + load, scaled) / (workers × horizonMs).
 */
import type { Plan } from "../../contracts/messages.ts";
import { batchLatencyMs, type ProfileSet } from "../profile/profile-set.ts";
import { countSwaps, swappedWorkers } from "./assignment.ts";
import { workerCapacityQps } from "./decision.ts";
import { RULE_DRIVEN_POLICIES } from "./policies.ts";

/** Damping knobs; times are wall-clock ms (already scaled). */
export interface DampingOptions {
  /** Least time a worker stays on a model after a swap, ms. Default 120 s × time scale. */
  minDwellMs?: number;
  /** Time over which a swap's capacity loss is amortised, ms. Default 120 s × time scale. */
  horizonMs?: number;
  /** FID points a plan must gain per unit of capacity share lost over the horizon. Default 2. */
  fidPerLostCapacity?: number;
  /** FID gain required even for a free swap. Default 0.02. */
  minFidGain?: number;
}

/** Inputs of `dampPlan`. */
export interface DampingInput {
  current: Plan | null;
  candidate: Plan;
  /** Last time each worker swapped model, ms (absent = never). */
  lastSwapAtMs: Record<string, number>;
  nowMs: number;
  /** Demand now, qps, to test whether the current plan still covers it. */
  demandQps: number;
  /** Queue delay per model now, ms. */
  queueDelayMs?: Record<string, number>;
  profiles: ProfileSet;
  options?: DampingOptions;
}

/** The damping verdict. */
export interface DampingVerdict {
  adopt: boolean;
  reason: string;
  /** Workers the candidate moves off a model they hold. */
  swaps: number;
  /** FID gain of the candidate (positive = better). */
  fidGain: number;
  /** Gain the swaps require (0 when adopted unconditionally). */
  requiredGain: number;
  /** Moved workers still inside their dwell time. */
  dwelling: string[];
}

/**
 * Why `plan` cannot serve `demandQps` within its SLO (capacity per model, or the slowest
 * path with queue delays), or null when it can.
 */
export function planShortfall(
  plan: Plan,
  demandQps: number,
  profiles: ProfileSet,
  queueDelayMs: Record<string, number> = {},
): string | null {
  const single = plan.pair.light === plan.pair.heavy;
  const loads: [string, number][] = single
    ? [[plan.pair.light, demandQps]]
    : [
        [plan.pair.light, demandQps * (1 - plan.routerThreshold)],
        [plan.pair.heavy, demandQps * plan.heavyShare],
      ];
  const pathMs: Record<string, number> = {};
  for (const [model, load] of loads) {
    const profile = profiles.byName.get(model);
    const alloc = plan.models[model];
    if (!profile) return `unknown model ${model}`;
    const batch = alloc?.batchSize ?? 1;
    pathMs[model] = batchLatencyMs(profile, batch, plan.timeScale) + (queueDelayMs[model] ?? 0);
    if (load <= 0) continue;
    const capacity = (alloc?.workers ?? 0) * workerCapacityQps(profile, batch, plan.timeScale);
    if (capacity < load) return `${model} capacity ${capacity.toFixed(1)} qps < load ${load.toFixed(1)} qps`;
  }
  const cascade = !single && plan.discThreshold > 0 && plan.routerThreshold < 1;
  const judgeMs = profiles.pool.judge.latencyMs * plan.timeScale;
  const slowest = cascade
    ? pathMs[plan.pair.light] + judgeMs + pathMs[plan.pair.heavy]
    : Math.max(...loads.filter(([, l]) => l > 0 || loads.length === 1).map(([m]) => pathMs[m]), 0);
  if (slowest > plan.sloMs) return `slowest path ${slowest.toFixed(0)} ms > SLO ${plan.sloMs} ms`;
  return null;
}

/** Decides whether `candidate` replaces `current` now. */
export function dampPlan(input: DampingInput): DampingVerdict {
  const { current, candidate, nowMs, profiles } = input;
  const adopt = (reason: string, swaps = 0, fidGain = 0): DampingVerdict => ({
    adopt: true,
    reason,
    swaps,
    fidGain,
    requiredGain: 0,
    dwelling: [],
  });
  if (!current) return adopt("first plan");
  const live = new Set(Object.keys(candidate.assignment));
  const before = Object.fromEntries(Object.entries(current.assignment).filter(([id]) => live.has(id)));
  const swaps = countSwaps(before, candidate.assignment);
  const fidGain = (current.expectedFid ?? Number.POSITIVE_INFINITY) - (candidate.expectedFid ?? Number.POSITIVE_INFINITY);
  const gain = Number.isFinite(fidGain) ? fidGain : 0;
  if (swaps === 0) return adopt("no worker moves", 0, gain);
  // The operator chose another policy (a manager restarted with --policy): its plans, at once.
  if (candidate.policy !== current.policy) return adopt(`policy changed: ${current.policy} → ${candidate.policy}`, swaps, gain);
  if ((current.degraded ?? 0) > 0 && (candidate.degraded ?? 0) === 0) return adopt("leaves the degraded plan", swaps, gain);
  const scale = candidate.timeScale;
  const o = input.options ?? {};
  const minDwellMs = o.minDwellMs ?? 120_000 * scale;
  const moved = swappedWorkers(before, candidate.assignment);
  const dwelling = moved.filter((id) => input.lastSwapAtMs[id] !== undefined && nowMs - input.lastSwapAtMs[id] < minDwellMs);

  const shortfall = planShortfall(current, input.demandQps, profiles, input.queueDelayMs);
  // A plan that covers the demand but falls short only by the queues it has now (a backlog, often
  // left by the swaps that brought it in: workers loading serve nothing) drains them if kept;
  // replacing it moves workers again and feeds the backlog (on an 8-model pool HADIS swapped
  // between two pairs every tick so). Such a shortfall does not override the dwell.
  const queuesOnly = shortfall !== null && planShortfall(current, input.demandQps, profiles) === null;
  if (shortfall && !(queuesOnly && dwelling.length > 0)) return adopt(`current plan falls short: ${shortfall}`, swaps, gain);

  const horizonMs = o.horizonMs ?? 120_000 * scale;
  const perLost = o.fidPerLostCapacity ?? 2;
  const minGain = o.minFidGain ?? 0.02;
  let lostMs = 0;
  for (const id of moved) {
    const from = profiles.byName.get(before[id]);
    const to = candidate.assignment[id] ? profiles.byName.get(candidate.assignment[id]) : undefined;
    lostMs += ((from?.unloadMs ?? 0) + (to?.loadMs ?? 0)) * scale;
  }
  const workers = Math.max(1, live.size);
  const requiredGain = minGain + perLost * (lostMs / (workers * horizonMs));
  const base = { swaps, fidGain: gain, requiredGain, dwelling };
  if (dwelling.length > 0) {
    const why = shortfall ? ` (the plan in force falls short only by its queues: ${shortfall})` : "";
    return {
      ...base,
      adopt: false,
      reason: `held: ${dwelling.length} of ${swaps} moved workers within ${minDwellMs.toFixed(0)} ms dwell${why}`,
    };
  }
  // A policy that follows a rule of its own, not an FID objective (INFaaS-Acc steps down under
  // queue pressure, to a less accurate variant on purpose): dwell is its only damping.
  if ((RULE_DRIVEN_POLICIES as readonly string[]).includes(candidate.policy))
    return { ...base, adopt: true, reason: `${candidate.policy}'s own rule, past dwell` };
  if (gain >= requiredGain) {
    return { ...base, adopt: true, reason: `FID gain ${gain.toFixed(3)} ≥ ${requiredGain.toFixed(3)} required for ${swaps} swaps` };
  }
  return { ...base, adopt: false, reason: `held: FID gain ${gain.toFixed(3)} < ${requiredGain.toFixed(3)} required for ${swaps} swaps` };
}
