/**
 * The static policy: one configuration from config, workers split between the two models in
 * proportion to the GPU time each needs (share of requests × per-image latency).
 */
import type { ModelProfile } from "../../contracts/profile.ts";
import type { PlanDecision } from "./decision.ts";

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
export function staticDecision(config: StaticConfig, profiles: ReadonlyMap<string, ModelProfile>, workers: number): PlanDecision {
  const heavyShare = heavyShareOf(config.routerThreshold, config.discThreshold);
  const single = config.light === config.heavy;
  const models: PlanDecision["models"] = {};
  if (single || workers < 2) {
    models[config.heavy] = { workers, batchSize: config.heavyBatchSize };
  } else {
    const per = (m: string) => profiles.get(m)?.latencyMsByBatch["1"] ?? 1;
    const lightLoad = (1 - config.routerThreshold) * per(config.light);
    const heavyLoad = heavyShare * per(config.heavy);
    const total = lightLoad + heavyLoad;
    const lightWorkers = total > 0 ? Math.min(workers - 1, Math.max(1, Math.round((workers * lightLoad) / total))) : Math.ceil(workers / 2);
    models[config.light] = { workers: lightWorkers, batchSize: config.lightBatchSize };
    models[config.heavy] = { workers: workers - lightWorkers, batchSize: config.heavyBatchSize };
  }
  return {
    pair: { light: config.light, heavy: config.heavy },
    routerThreshold: single ? 0 : config.routerThreshold,
    discThreshold: single ? 0 : config.discThreshold,
    heavyShare: single ? 1 : heavyShare,
    expectedFid: config.expectedFid,
    models,
    reason: `static configuration over ${workers} workers`,
    degraded: 0,
  };
}
