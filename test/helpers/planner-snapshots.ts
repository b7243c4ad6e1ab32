/** Planner snapshots the planner tests share. */
import type { PlannerSnapshot } from "../../actors/planner/snapshot.ts";

/**
 * 16 workers, 12 on sd3.5-medium and 4 on sd3.5-large, the plan in force (of `policy`) serving that
 * pair at batch size 1, SLO 6 s at time scale 0.1; `current: false` leaves out the plan in force.
 */
export function settledSnapshot(
  demandQps: number,
  { policy = "hadis", current = true }: { policy?: string; current?: boolean } = {},
): PlannerSnapshot {
  const workers = Array.from({ length: 16 }, (_, i) => ({
    id: `w-${String(i).padStart(2, "0")}`,
    model: i < 12 ? "sd35-medium" : "sd35-large",
  }));
  const plan = {
    v: 1 as const,
    epoch: 1,
    policy,
    issuedAtMs: 0,
    sloMs: 6_000,
    timeScale: 0.1,
    pair: { light: "sd35-medium", heavy: "sd35-large" },
    routerThreshold: 0.1,
    discThreshold: 0,
    heavyShare: 0.1,
    models: { "sd35-medium": { workers: 12, batchSize: 1 }, "sd35-large": { workers: 4, batchSize: 1 } },
    assignment: Object.fromEntries(workers.map((w) => [w.id, w.model])),
    reason: "",
  };
  return { nowMs: 0, demandQps, queueDepth: {}, queueDelayMs: {}, workers, current: current ? plan : null, sloMs: 6_000, timeScale: 0.1 };
}
