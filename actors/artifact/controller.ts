/**
 * The artifact controller's allocation step (`tick` switch): the policy's decision becomes the
 * plan at once, without damping or dwell, and workers are handed out in registration order to
 * the models in the allocator's order. Follows `controller/controller.py` (eventLoop, allocate*).
 */
import type { Plan } from "../../contracts/messages.ts";
import { decisionToPlan, type PlanDecision } from "../planner/decision.ts";
import type { PlannerPolicy } from "../planner/policies.ts";
import type { PlannerSnapshot, WorkerInventoryItem } from "../planner/snapshot.ts";
import type { ProfileSet } from "../profile/profile-set.ts";
import type { SolveFn } from "../planner/solver.ts";
import type { ArtifactSignals } from "./signals.ts";

/** Seconds of trace time between allocations (`ALLOC_INTERVAL_TRACE_SEC`). */
export const ALLOC_INTERVAL_TRACE_S = 50;

/** The controller's allocation period, ms of wall clock: 50 trace-seconds × time scale, whole ticks of 1 s. */
export function allocationPeriodMs(timeScale: number): number {
  return Math.max(1, Math.round(ALLOC_INTERVAL_TRACE_S * timeScale)) * 1_000;
}

/** What one allocation sees. */
export interface ArtifactTickInput {
  nowMs: number;
  /** The demand the policy plans with (the `demand` switch decides which signal). */
  demandQps: number;
  signals: ArtifactSignals;
  /** Queue depth per model now. */
  queueDepth: Record<string, number>;
  workers: WorkerInventoryItem[];
  current: Plan | null;
  /** Workers have queues of their own (the artifact's `dispatch`). */
  perWorkerQueues?: boolean;
}

/** Fixed inputs of the allocation step. */
export interface ArtifactTickConfig {
  policyName: string;
  policy: PlannerPolicy;
  profiles: ProfileSet;
  solve: SolveFn;
  sloMs: number;
  timeScale: number;
}

/**
 * Workers in registration (id) order, each to the first model in `decision.models` order with
 * a place left; workers beyond the decision's counts join its first model.
 */
export function registrationOrderAssignment(
  workers: readonly WorkerInventoryItem[],
  models: PlanDecision["models"],
): Record<string, string> {
  const left = Object.entries(models).map(([m, a]) => [m, a.workers] as [string, number]);
  const out: Record<string, string> = {};
  for (const w of [...workers].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    const slot = left.find(([, n]) => n > 0);
    if (slot) {
      out[w.id] = slot[0];
      slot[1]--;
    } else if (left.length > 0) out[w.id] = left[0][0];
  }
  return out;
}

/** One allocation: the plan to publish (null keeps the one in force), with the decision behind it and what the policy saw. */
export async function artifactTick(
  input: ArtifactTickInput,
  config: ArtifactTickConfig,
): Promise<{ plan: Plan | null; decision: PlanDecision; snapshot: PlannerSnapshot }> {
  const snapshot: PlannerSnapshot = {
    nowMs: input.nowMs,
    demandQps: input.demandQps,
    queueDepth: input.queueDepth,
    queueDelayMs: {},
    workers: input.workers,
    current: input.current,
    // Every allocation publishes its plan, which carries the demand it read: the previous tick's.
    ...(input.current?.demandQps !== undefined ? { previousDemandQps: input.current.demandQps } : {}),
    sloMs: config.sloMs,
    timeScale: config.timeScale,
    signals: input.signals,
    ...(input.perWorkerQueues ? { perWorkerQueues: true } : {}),
  };
  const decision = await config.policy(snapshot, config.profiles, config.solve);
  if (input.current && (decision.solverStatus === "Error" || decision.solverStatus === "Timeout"))
    return { plan: null, decision, snapshot };
  const assignment = registrationOrderAssignment(input.workers, decision.models);
  const models: PlanDecision["models"] = {};
  for (const m of Object.values(assignment))
    models[m] = { workers: (models[m]?.workers ?? 0) + 1, batchSize: decision.models[m].batchSize };
  const plan = decisionToPlan(
    { ...decision, models },
    {
      epoch: (input.current?.epoch ?? 0) + 1,
      policy: config.policyName,
      issuedAtMs: input.nowMs,
      sloMs: config.sloMs,
      timeScale: config.timeScale,
      assignment,
    },
  );
  plan.demandQps = Math.round(input.demandQps * 100) / 100;
  return { plan, decision, snapshot };
}
