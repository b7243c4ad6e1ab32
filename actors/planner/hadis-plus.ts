/**
 * hadis-plus's planner: HADIS's MILP over the same table, with swaps priced, backlogs cleared
 * rather than fled, a loading worker's lost capacity counted only when it changes the move, and
 * a fall in demand planned at half its depth until the next tick confirms it (`plannedDemandQps`).
 *
 * Two solves per tick (the model is built twice; at 1,000 workers a solve took at most 956 ms
 * against a 2 s tick, `bench/scale.ts`):
 * - *safe*: coverage counts a worker that must load at the part of the next tick it can still
 *   serve, so a plan never leans on capacity that is still loading;
 * - *bold*: coverage counts the plan's workers as if loaded (the loading time stays priced in
 *   the objective).
 * The bold plan is taken when it moves no more workers than the safe one: its transient is then
 * no worse, and it is free of the safe plan's bias to a model that loads quickly whatever its FID.
 * It is also taken, if its FID is lower, once demand has fallen a fifth below what the plan in
 * force was made for: the capacity the fall freed covers the workers it loads. (Without this the
 * safe plan held sdxl-lightning → sd3.5-large-turbo for 90 s on the anchor trace as demand eased
 * from 63 to 55 QPS, where sd3.5-large-turbo → sd3.5-medium fitted, a whole FID point better.)
 * (In the simulator, safe alone kept violations low and cost FID; bold alone gained FID and gave
 * the violations back in the big moves it made: the README's benchmark document has the figures.)
 */
import type { ParetoRow } from "../profile/reference.ts";
import type { ProfileSet } from "../profile/profile-set.ts";
import { modelCapacityQps, type PlanDecision } from "./decision.ts";
import { planWithMilp, type MilpOptions } from "./milp.ts";
import { holdingCounts, QUEUE_SAFETY, queueDelayMs, type PlannerSnapshot, type WorkerInventoryItem } from "./snapshot.ts";
import type { SolveFn } from "./solver.ts";

/** hadis-plus's planning constants (times are before the time scale). */
export const HADIS_PLUS_PLANNER = {
  /** Horizon over which a swap's lost capacity is priced, ms. */
  swapHorizonMs: 120_000,
  /** FID a swap costs per unit of pool capacity lost over the horizon (the damping's rate). */
  fidPerLostCapacity: 2,
  /** Queue waits a plan may promise a backlogged model by giving it the capacity to clear it, as shares of the SLO. */
  drainSloShares: [0.25, 0.5],
  /** Demand this far below the plan in force's (as a share of it) lets the bold plan load more workers than the safe one. */
  boldOnDemandFall: 0.2,
} as const;

/**
 * The MILP options of hadis-plus's safe solve. Between plans of equal FID and swaps it takes
 * the shorter batch under shared queues and the larger (within the path) under per-worker ones:
 * with one queue per model an idle worker takes the next item, so a shorter batch shortens every
 * path; with a queue per worker (the artifact's random dispatch) an item waits behind its own
 * worker's batches whatever the others do, a cap above one is used only when that queue holds
 * several, and then the larger cap clears it sooner (docs/benchmarks.md has the figures).
 */
export function hadisPlusOptions(snapshot: PlannerSnapshot): MilpOptions {
  return {
    ...(snapshot.perWorkerQueues ? { batchTieBreak: "larger" as const } : {}),
    swapAware: {
      horizonMs: HADIS_PLUS_PLANNER.swapHorizonMs * snapshot.timeScale,
      tickMs: Math.max(500, 20_000 * snapshot.timeScale),
      fidPerLostCapacity: HADIS_PLUS_PLANNER.fidPerLostCapacity,
    },
    drain: { budgetsMs: HADIS_PLUS_PLANNER.drainSloShares.map((f) => f * snapshot.sloMs), safety: QUEUE_SAFETY },
  };
}

/** Workers a decision puts on a model they do not hold now (the MILP's loads). */
export function workersToLoad(decision: Pick<PlanDecision, "models">, workers: readonly WorkerInventoryItem[]): number {
  const holding = holdingCounts(workers);
  return Object.entries(decision.models).reduce((sum, [m, a]) => sum + Math.max(0, a.workers - (holding[m] ?? 0)), 0);
}

/**
 * The demand hadis-plus plans for: demand now, or, when it is below what the previous tick read,
 * halfway between the two. A rise is planned for at once; a fall at half its depth until the
 * next tick confirms it. The demand the planners read can be noisy (under the artifact's
 * controller it is a count of queries in flight, read every 5 s: at 32 QPS, seed 1, HADIS's
 * planner read 27 and, 5 s later, 55), and a plan that follows each dip moves workers off the
 * capacity the next swing needs back. Scale up fast, scale down slow, as an autoscaler's
 * down-scale stabilisation does.
 */
export function plannedDemandQps(snapshot: Pick<PlannerSnapshot, "demandQps" | "previousDemandQps">): number {
  const was = snapshot.previousDemandQps;
  return was === undefined ? snapshot.demandQps : Math.max(snapshot.demandQps, (snapshot.demandQps + was) / 2);
}

/** Whether demand has fallen `boldOnDemandFall` below what the plan in force was made for (false without one, or without its demand). */
export function demandFell(snapshot: Pick<PlannerSnapshot, "demandQps" | "current">): boolean {
  const was = snapshot.current?.demandQps;
  return was !== undefined && snapshot.demandQps <= was * (1 - HADIS_PLUS_PLANNER.boldOnDemandFall);
}

/**
 * The safe plan or the bold one: bold when both are feasible and bold loads no more workers, or,
 * demand having fallen (`demandFell`), when its FID is lower whatever it loads.
 * The first plan (every worker loads either way) is the safe solve's.
 */
export function chooseBolder(
  safe: PlanDecision,
  bold: PlanDecision | null,
  workers: readonly WorkerInventoryItem[],
  fell = false,
): PlanDecision {
  if (!bold || safe.degraded || bold.degraded) return safe;
  if (fell && bold.expectedFid < safe.expectedFid) return bold;
  return workersToLoad(bold, workers) <= workersToLoad(safe, workers) ? bold : safe;
}

/**
 * The queue waits hadis-plus plans with: each wait the manager gives (Little's law: depth over the
 * arrival rate, floored at half the capacity) read again as the time the plan in force's workers
 * take to clear the items ahead, depth over their capacity (× QUEUE_SAFETY, 1.5). A newcomer to a
 * FIFO queue waits for those items whatever arrives after it. Read by the arrival rate, a backlog
 * that the workers clear in 2-3 s read as 5.5 s (seed 12 at 96 QPS: 19 items on eight sd3.5-medium
 * workers, a heavy model with a small share), the path missed the SLO, and the plan fled to a pair
 * 1.0 FID worse; and a queue whose arrivals outrun its workers read shorter than it is. A model
 * the plan in force gives no workers keeps the manager's wait (so does a model the manager gives
 * none for: under the artifact's controller, none).
 */
export function backlogWaitsMs(snapshot: PlannerSnapshot, profiles: ProfileSet): Record<string, number> {
  const waits = { ...snapshot.queueDelayMs };
  const capacity = modelCapacityQps(snapshot.current, profiles);
  for (const model of Object.keys(waits)) {
    const depth = snapshot.queueDepth[model] ?? 0;
    if (depth > 0 && capacity[model] !== undefined) waits[model] = queueDelayMs(depth, capacity[model], QUEUE_SAFETY);
  }
  return waits;
}

/** hadis-plus as built, or with a part left out (the ablation bench): one of the two solves alone, no draining, no bold plan on a fall. */
export interface HadisPlusVariant {
  solves?: "both" | "safe" | "bold";
  drain?: boolean;
  boldOnFall?: boolean;
  /** Queue waits as the plan in force clears them (`backlogWaitsMs`), not as the manager gives them. */
  backlogWaits?: boolean;
  /** A fall in demand planned for at half its depth until the next tick (`plannedDemandQps`). */
  slowFall?: boolean;
}

/** One hadis-plus tick over `table`. */
export async function hadisPlusDecision(
  snapshot: PlannerSnapshot,
  profiles: ProfileSet,
  table: ParetoRow[],
  solve: SolveFn,
  { solves = "both", drain = true, boldOnFall = true, backlogWaits = true, slowFall = true }: HadisPlusVariant = {},
): Promise<PlanDecision> {
  if (slowFall) snapshot = { ...snapshot, demandQps: plannedDemandQps(snapshot) };
  if (backlogWaits) snapshot = { ...snapshot, queueDelayMs: backlogWaitsMs(snapshot, profiles) };
  const options = { ...hadisPlusOptions(snapshot), ...(drain ? {} : { drain: undefined }) };
  const boldOptions = { ...options, swapAware: { ...options.swapAware!, coverLoading: false } };
  if (solves === "bold") return planWithMilp(snapshot, profiles, table, solve, boldOptions);
  const safe = await planWithMilp(snapshot, profiles, table, solve, options);
  if (solves === "safe" || !snapshot.current) return safe;
  const bold = await planWithMilp(snapshot, profiles, table, solve, boldOptions);
  // No safe plan (none covers the demand while workers load): the bold one, if it has one.
  if (safe.degraded && !bold.degraded) return bold;
  return chooseBolder(safe, bold, snapshot.workers, boldOnFall && demandFell(snapshot));
}
