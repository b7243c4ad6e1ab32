/**
 * What an artifact worker decides on its own: which queries of its queue it runs or drops
 * (`serviceQueue`), whether its router sends a query straight on (`isHardByRouter`) and whether
 * its discriminator passes a light image (`executeBatch`). Follows `hadis/src/worker/model.py`.
 */
import type { HardnessThreshold } from "../routing/difficulty.ts";
import { sortedCopy } from "../profile/stats.ts";

/** The worker's default admission: a query is started only if it can finish within 1.5 × SLO (`SLO_FACTOR`). */
export const ARTIFACT_SLO_FACTOR = 1.5;

/** Discriminator time per batch on every worker in profile mode (`time.sleep(0.01)`), wall ms. */
export const ARTIFACT_JUDGE_MS = 10;

/** `sorted[max(int(len × q) − 1, 0)]`: the artifact's percentile entry of a sorted distribution. */
export function percentileEntry(sorted: ArrayLike<number>, q: number): number {
  return sorted[Math.max(Math.trunc(sorted.length * q) - 1, 0)];
}

/** The discriminator's verdict: a light image passes when its score is at or above the `share` percentile entry of the model's scores. */
export function artifactQualified(score: number, sortedScores: ArrayLike<number>, share: number): boolean {
  return score >= percentileEntry(sortedScores, share);
}

/** The router's cut: a prompt is hard when its score is at or above the (1 − r) percentile entry of the reference scores. */
export class ArtifactRouterThreshold implements HardnessThreshold {
  private readonly sorted: Float64Array;
  constructor(referenceScores: ArrayLike<number>) {
    this.sorted = sortedCopy(referenceScores);
  }
  isHard(score: number, share: number): boolean {
    return score >= percentileEntry(this.sorted, 1 - share);
  }
}

/**
 * Takes the next batch from a worker's queue as `serviceQueue` does: up to `batchSize` pops; a
 * query is dropped when its elapsed time plus the runtime of the batch being formed exceeds
 * `limitMs` (the batch size checked is min(batchSize, taken + still queued)). Mutates `queue`.
 */
export function takeArtifactBatch<T>(
  queue: T[],
  batchSize: number,
  runtimeMs: (n: number) => number,
  elapsedMs: (item: T) => number,
  limitMs: number,
): { batch: T[]; dropped: T[] } {
  const batch: T[] = [];
  const dropped: T[] = [];
  for (let i = 0; i < batchSize && queue.length > 0; i++) {
    const n = Math.min(batchSize, batch.length + queue.length);
    const item = queue.shift()!;
    if (elapsedMs(item) + runtimeMs(n) > limitMs) dropped.push(item);
    else batch.push(item);
  }
  return { batch, dropped };
}
