/**
 * hadis-plus's deadline-aware cascade: per request, from the path ahead of it (queue wait from the
 * live depth, batch latency, judge), whether the light stage is worth running and whether a
 * rejected light image can still be remade by the heavy model in time. Pure: estimates in, choices out.
 */

/** How long a generation of one model would take if queued now, ms: the batches ahead of it, then its own. */
export function stageEstimateMs(queued: number, workers: number, batchSize: number, batchLatencyMs: number): number {
  if (workers <= 0) return Number.POSITIVE_INFINITY;
  const perRound = workers * Math.max(1, batchSize);
  return (Math.floor(Math.max(0, queued) / perRound) + 1) * batchLatencyMs;
}

/** The path a request would take from now. */
export interface PathEstimate {
  /** Light generation, queue included, ms. */
  lightMs: number;
  /** Judging, ms. */
  judgeMs: number;
  /** Heavy generation, queue included, ms. */
  heavyMs: number;
}

/** What the admission decides for a request the router sends to the light model. */
export type AdmissionChoice =
  /** Light, judge, and the heavy model if rejected: everything fits. */
  | "cascade"
  /** Straight to the heavy model: light and heavy cannot both fit, the heavy alone does, and it has room. */
  | "heavy"
  /** Light only: a rejected image is served as it is (degraded), since the heavy model could not remake it in time. */
  | "light";

/** The admission's choice for a light-routed request with `leftMs` to its deadline. */
export function admissionChoice(leftMs: number, path: PathEstimate, heavyHasRoom: boolean): AdmissionChoice {
  if (path.lightMs + path.judgeMs + path.heavyMs <= leftMs) return "cascade";
  if (path.heavyMs <= leftMs && heavyHasRoom) return "heavy";
  return "light";
}

/** Whether a rejected light image can be remade by the heavy model before the deadline. */
export function escalationFits(leftMs: number, heavyMs: number): boolean {
  return heavyMs <= leftMs;
}

/**
 * For a prompt the router sends straight to the heavy model: the light model instead, served
 * without judging (degraded), when the heavy model cannot answer in the time left and the light one can.
 */
export function hardFallsBackToLight(leftMs: number, path: Pick<PathEstimate, "lightMs" | "heavyMs">): boolean {
  return path.heavyMs > leftMs && path.lightMs <= leftMs;
}
