/**
 * The static policy: one configuration from config, workers split between the two models in
 * proportion to the GPU time each needs (share of requests × per-image latency).
 */
import type { PlanDecision } from "../planner/decision.ts";
import type { PlannerPolicy } from "../planner/policies.ts";

/** A fixed configuration. */
export interface StaticConfig {
  light: string;
  heavy: string;
  routerThreshold: number;
  discThreshold: number;
  lightBatchSize: number;
  heavyBatchSize: number;
  expectedFid?: number;
}

/** Expected share of requests ending on the heavy model: routed plus escalated. */
export function heavyShareOf(routerThreshold: number, discThreshold: number): number {
  return routerThreshold + (1 - routerThreshold) * discThreshold;
}

/** Splits `workers` for a static configuration; each used model gets at least one when possible. */
export function staticDecision(config: StaticConfig, latencyMs: (model: string) => number, workers: number): PlanDecision {
  const heavyShare = heavyShareOf(config.routerThreshold, config.discThreshold);
  // One worker cannot hold two models: everything goes to the heavy one, and is routed there
  // (routing most requests to a light model nobody serves left them to be purged).
  const single = config.light === config.heavy || workers < 2;
  const models: PlanDecision["models"] = {};
  if (single) {
    models[config.heavy] = { workers, batchSize: config.heavyBatchSize };
  } else {
    const lightLoad = (1 - config.routerThreshold) * latencyMs(config.light);
    const heavyLoad = heavyShare * latencyMs(config.heavy);
    const total = lightLoad + heavyLoad;
    const lightWorkers = total > 0 ? Math.min(workers - 1, Math.max(1, Math.round((workers * lightLoad) / total))) : Math.ceil(workers / 2);
    models[config.light] = { workers: lightWorkers, batchSize: config.lightBatchSize };
    models[config.heavy] = { workers: workers - lightWorkers, batchSize: config.heavyBatchSize };
  }
  return {
    pair: single ? { light: config.heavy, heavy: config.heavy } : { light: config.light, heavy: config.heavy },
    routerThreshold: single ? 0 : config.routerThreshold,
    discThreshold: single ? 0 : config.discThreshold,
    heavyShare: single ? 1 : heavyShare,
    // The configuration's FID is for its pair: one model alone is another point.
    expectedFid: single && config.light !== config.heavy ? Number.NaN : (config.expectedFid ?? Number.NaN),
    models,
    reason: `static configuration over ${workers} workers`,
    degraded: 0,
  };
}

/** The static configuration as a planner policy (its batches are held to the workers' caps where every decision is: `controlTick`). */
export function staticPolicy(config: StaticConfig): PlannerPolicy {
  return async (snapshot, profiles) =>
    staticDecision(config, (m) => profiles.byName.get(m)?.latencyMsByBatch["1"] ?? 1, snapshot.workers.length);
}
