/**
 * Latency tables as the artifact uses them: what a worker sleeps per batch (odd batch sizes
 * interpolated or read at batch 4) and what the planners see (rounded to 0.1 s). Follows
 * `hadis/src/config.py` (get_model_runtimes, get_controller_runtimes) and `worker/model.py`.
 */
import type { ModelProfile } from "../../contracts/profile.ts";
import { batchLatencyMs, type ProfileSet } from "../profile/profile-set.ts";

/** Batch sizes the artifact's workers run at their own latency; any other size runs at batch 4's. */
const OWN_LATENCY = new Set([1, 2, 3, 4, 5, 6, 7, 8, 16, 32]);

/** The batch size whose latency a batch of `n` queries runs at (`bs if bs in [1..8,16,32] else 4`). */
export function artifactBatchKey(n: number): number {
  return OWN_LATENCY.has(n) ? n : 4;
}

/**
 * A worker's execution time for a batch of `n` queries, ms: the profile at 1, 2, 4, 8, 16, 32;
 * 3, 5, 6, 7 as the means of (2, 4), (2, 8), (4, 8), (6, 8); every other size at batch 4.
 */
export function artifactExecMs(model: ModelProfile, n: number, timeScale: number): number {
  const at = (b: number) => batchLatencyMs(model, b, timeScale);
  const k = artifactBatchKey(n);
  switch (k) {
    case 3:
      return (at(2) + at(4)) / 2;
    case 5:
      return (at(2) + at(8)) / 2;
    case 6:
      return (at(4) + at(8)) / 2;
    case 7:
      return ((at(4) + at(8)) / 2 + at(8)) / 2;
    default:
      return at(k);
  }
}

/** The planners' latency of a batch, ms: the profiled latency rounded to 0.1 s (`round(seconds, 1)`). */
export function artifactPlannerMs(model: ModelProfile, b: number, timeScale: number): number {
  return Math.round(batchLatencyMs(model, b, timeScale) / 100) * 100;
}

/** A profile whose latency table is the planners' rounded one (what the artifact's allocators read). */
export function withPlannerLatencies(model: ModelProfile, timeScale: number): ModelProfile {
  const table: Record<string, number> = {};
  for (const b of Object.keys(model.latencyMsByBatch)) table[b] = artifactPlannerMs(model, Number(b), timeScale) / timeScale;
  return { ...model, latencyMsByBatch: table };
}

/** The planners' view of the pool: latencies rounded to 0.1 s when `rounded` (the artifact's `latency`), else the pool as it is. */
export function plannerView(profiles: ProfileSet, rounded: boolean, timeScale: number): ProfileSet {
  if (!rounded) return profiles;
  const models = profiles.models.map((m) => withPlannerLatencies(m, timeScale));
  return { ...profiles, models, byName: new Map(models.map((m) => [m.name, m])) };
}
