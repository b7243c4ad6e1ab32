/** What a planning policy decides in one control tick, before workers are named. */

/** A policy's decision: the configuration and how many workers (at which batch) each model gets. */
export interface PlanDecision {
  pair: { light: string; heavy: string };
  routerThreshold: number;
  discThreshold: number;
  heavyShare: number;
  expectedFid?: number;
  models: Record<string, { workers: number; batchSize: number }>;
  reason: string;
  /** 0 = normal; higher = a step down the degradation ladder. */
  degraded: number;
  solveMs?: number;
}
