/**
 * The planner's output (`PlanDecision`), the table rows it chooses from resolved to model
 * names, the spread of leftover workers, and the defined degraded plan.
 */
import type { ModelProfile } from "../../contracts/profile.ts";
import { PROTOCOL_VERSION, type Plan } from "../../contracts/messages.ts";
import type { ParetoRow } from "../profile/reference.ts";
import { batchLatencyMs, batchSizesOf, type ProfileSet } from "../profile/profile-set.ts";
import type { PlannerSnapshot } from "./snapshot.ts";

/** Workers and batch size the decision gives one model. */
export interface ModelDecision {
  workers: number;
  batchSize: number;
}

/** What a planner policy decides for one tick; the resource manager turns it into a `Plan`. */
export interface PlanDecision {
  pair: { light: string; heavy: string };
  /** Share of prompts (0..1) routed straight to the heavy model. */
  routerThreshold: number;
  /** Share of light images (0..1) the discriminator escalates. */
  discThreshold: number;
  /** Expected share of requests ending on the heavy model. */
  heavyShare: number;
  /** Expected FID of the configuration. */
  expectedFid: number;
  models: Record<string, ModelDecision>;
  reason: string;
  /** 0 = normal; 1 = infeasible, the lightest configuration is served. */
  degraded: number;
  /** Solver wall time, ms, when a MILP was solved. */
  solveMs?: number;
  /** Solver status when a MILP was solved ("Optimal", "Error", …). */
  solverStatus?: string;
  /** How the router picks the heavy share (default by difficulty); see `Plan.routerMode`. */
  routerMode?: Plan["routerMode"];
}

/** A table row with model names and the per-model demand shares it implies. */
export interface ResolvedRow {
  row: ParetoRow;
  light: string;
  heavy: string;
  /** Share of demand the light model serves (1 − router share); 0 when light = heavy is not a cascade. */
  lightLoad: number;
  /** Share of demand the heavy model serves (the heavy share). */
  heavyLoad: number;
  /** Whether an escalated request passes light → judge → heavy. */
  cascade: boolean;
}

/** Resolves table rows to model names (rows naming models outside the pool are dropped). */
export function resolveRows(table: ParetoRow[], profiles: ProfileSet): ResolvedRow[] {
  const out: ResolvedRow[] = [];
  for (const row of table) {
    const light = profiles.nameByReferenceId.get(row.lightId);
    const heavy = profiles.nameByReferenceId.get(row.heavyId);
    if (!light || !heavy) continue;
    if (light === heavy) {
      out.push({ row, light, heavy, lightLoad: 1, heavyLoad: 0, cascade: false });
      continue;
    }
    const lightLoad = Math.max(0, 1 - row.routerThreshold);
    const heavyLoad = Math.max(0, Math.min(1, row.heavyShare));
    out.push({ row, light, heavy, lightLoad, heavyLoad, cascade: lightLoad > 0 && heavyLoad > 0 && row.discThreshold > 0 });
  }
  return out;
}

/** Requests per second one worker of `model` sustains at batch size `b`. */
export function workerCapacityQps(model: ModelProfile, b: number, timeScale: number): number {
  const ms = batchLatencyMs(model, b, timeScale);
  return ms > 0 ? (b * 1000) / ms : Number.POSITIVE_INFINITY;
}

/** Service capacity per model under a plan, qps (models without workers are left out). */
export function modelCapacityQps(plan: Plan | null, profiles: ProfileSet): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [m, a] of Object.entries(plan?.models ?? {})) {
    const p = profiles.byName.get(m);
    if (p && a.workers > 0) out[m] = a.workers * workerCapacityQps(p, a.batchSize, plan!.timeScale);
  }
  return out;
}

/** One model's minimal allocation from the solver plus what spreading needs. */
export interface ModelNeed {
  workers: number;
  batchSize: number;
  /** Demand the model receives, qps. */
  loadQps: number;
  /** Capacity of one worker at the batch size, qps. */
  capacityQps: number;
  /** Batch latency, ms (tie-break: slower models get spare workers first). */
  batchMs: number;
}

/**
 * Gives the workers left after the demand is covered to the chosen models: first workers
 * that already hold a chosen model stay on it (no swap), then the rest go one by one to the
 * model with the highest load per worker. Idle GPUs cut queueing, so none is left idle.
 */
export function spreadLeftover(needs: Record<string, ModelNeed>, workers: PlannerSnapshot["workers"]): Record<string, ModelDecision> {
  const names = Object.keys(needs).sort();
  const alloc: Record<string, number> = Object.fromEntries(names.map((n) => [n, needs[n].workers]));
  let left = workers.length - names.reduce((s, n) => s + alloc[n], 0);
  if (names.length === 0) return {};
  const utilisation = (n: string) => needs[n].loadQps / (Math.max(alloc[n], 1e-9) * needs[n].capacityQps);
  const byPressure = (a: string, b: string) => utilisation(b) - utilisation(a) || needs[b].batchMs - needs[a].batchMs || (a < b ? -1 : 1);
  // Every model the configuration uses serves at least one worker, even at zero demand:
  // a model in the pair without a worker would strand every request routed to it.
  for (const n of [...names].sort(byPressure)) {
    if (alloc[n] === 0 && left > 0) {
      alloc[n] = 1;
      left -= 1;
    }
  }
  const holding: Record<string, number> = {};
  for (const w of workers) if (w.model && w.model in alloc) holding[w.model] = (holding[w.model] ?? 0) + 1;
  for (const n of [...names].sort(byPressure)) {
    const keep = Math.min(Math.max(0, (holding[n] ?? 0) - alloc[n]), Math.max(0, left));
    alloc[n] += keep;
    left -= keep;
  }
  while (left > 0) {
    const target = [...names].sort(byPressure)[0];
    alloc[target] += 1;
    left -= 1;
  }
  return Object.fromEntries(names.map((n) => [n, { workers: alloc[n], batchSize: needs[n].batchSize }]));
}

/** Batch size of highest throughput whose latency (plus queue delay) fits the SLO; the fastest overall if none fits. */
export function maxThroughputBatch(model: ModelProfile, sloMs: number, queueMs: number, timeScale: number): number {
  const sizes = batchSizesOf(model);
  const fits = sizes.filter((b) => batchLatencyMs(model, b, timeScale) + queueMs <= sloMs);
  const pool = fits.length > 0 ? fits : sizes;
  let best: number = pool[0];
  for (const b of pool) if (workerCapacityQps(model, b, timeScale) > workerCapacityQps(model, best, timeScale) * (1 + 1e-9)) best = b;
  return best;
}

/**
 * The defined degraded plan: every live worker on the lightest model the table offers as a
 * light model (the cheapest pair's light model), no cascade, batch size of highest throughput.
 */
export function degradedDecision(snapshot: PlannerSnapshot, profiles: ProfileSet, table: ParetoRow[], reason: string): PlanDecision {
  const rows = resolveRows(table, profiles);
  const candidates = rows.length > 0 ? [...new Set(rows.map((r) => r.light))] : profiles.models.map((m) => m.name);
  const latency = (name: string) => batchLatencyMs(profiles.byName.get(name)!, 1, 1);
  const lightest = [...candidates].sort((a, b) => latency(a) - latency(b) || (a < b ? -1 : 1))[0];
  const profile = profiles.byName.get(lightest)!;
  const batchSize = maxThroughputBatch(profile, snapshot.sloMs, snapshot.queueDelayMs[lightest] ?? 0, snapshot.timeScale);
  const alone = rows.find((r) => r.light === lightest && r.heavyLoad === 0);
  const expectedFid = alone?.row.fid ?? profile.fidAlone ?? Number.NaN;
  const workers = snapshot.workers.length;
  const capacity = workers * workerCapacityQps(profile, batchSize, snapshot.timeScale);
  return {
    pair: { light: lightest, heavy: lightest },
    routerThreshold: 0,
    discThreshold: 0,
    heavyShare: 0,
    expectedFid,
    models: { [lightest]: { workers, batchSize } },
    reason: `degraded: ${reason}; all ${workers} workers on ${lightest} at batch ${batchSize} (capacity ${capacity.toFixed(1)} qps for ${snapshot.demandQps.toFixed(1)} qps demand)`,
    degraded: 1,
  };
}

/** Fields of a `Plan` that the decision does not carry. */
export interface PlanStamp {
  epoch: number;
  policy: string;
  issuedAtMs: number;
  sloMs: number;
  timeScale: number;
  assignment: Record<string, string>;
}

/** Turns a decision into the wire `Plan` (thresholds clamped to 0..1). */
export function decisionToPlan(decision: PlanDecision, stamp: PlanStamp): Plan {
  const clamp = (x: number) => Math.min(1, Math.max(0, x));
  const plan: Plan = {
    v: PROTOCOL_VERSION,
    epoch: stamp.epoch,
    policy: stamp.policy,
    issuedAtMs: stamp.issuedAtMs,
    sloMs: stamp.sloMs,
    timeScale: stamp.timeScale,
    pair: { ...decision.pair },
    routerThreshold: clamp(decision.routerThreshold),
    discThreshold: clamp(decision.discThreshold),
    heavyShare: clamp(decision.heavyShare),
    models: Object.fromEntries(Object.entries(decision.models).map(([m, a]) => [m, { ...a }])),
    assignment: { ...stamp.assignment },
    reason: decision.reason,
    degraded: decision.degraded,
  };
  if (decision.routerMode) plan.routerMode = decision.routerMode;
  if (Number.isFinite(decision.expectedFid)) plan.expectedFid = decision.expectedFid;
  return plan;
}
