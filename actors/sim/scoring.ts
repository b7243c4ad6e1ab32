/**
 * Scores a run (simulated or live) the way the HADIS artifact does: SLO violation ratio
 * ((timed out + dropped) / offered; an answer after the SLO counts as timed out), FID per
 * window (cascade policies: the table FID of the plan in force, time-weighted; the others: the
 * FID of the served model mix), mean served discriminator score, latency percentiles, goodput.
 * Pure: records in, figures out.
 */
import type { ProfileSet } from "../profile/profile-set.ts";

/** How one request ended. */
export type Outcome = "served" | "timedOut" | "dropped";

/** What scoring needs of one request. */
export interface RequestRecord {
  /** Arrival on the trace's clock, ms. */
  arrivalMs: number;
  /** Arrival to reply, ms (null when no reply came). */
  latencyMs: number | null;
  outcome: Outcome;
  route?: string;
  models?: { light?: string; heavy?: string };
  servedModel?: string;
  /** Discriminator score of the image served: the reference per-prompt score of the served model. */
  servedScore?: number;
  /** Why the image served is not the one the cascade meant (e.g. `degraded`: rejected, and no time to remake it). */
  fallback?: string;
}

/** A plan adopted at `atMs` (trace clock), with its table FID. */
export interface PlanMark {
  atMs: number;
  expectedFid?: number;
}

/** FID of one model alone and of a two-model mix (light, heavy by heavy share). */
export interface FidLookup {
  alone(model: string): number;
  mix(light: string, heavy: string, heavyShare: number): number;
  /** Lighter models first (pool order). */
  rank(model: string): number;
}

/** Policies scored by the table FID of the configuration in force (the rest by the served mix). */
export const CASCADE_POLICIES: readonly string[] = [
  "hadis",
  "hadis-plus",
  "clairvoyant",
  "router-only",
  "disc-only",
  "fixed-pair",
  "diffserve",
];

/** One scoring window (Figure 7's x axis). */
export interface WindowPoint {
  startMs: number;
  /** Arrivals per second in the window. */
  demandQps: number;
  offered: number;
  fid: number | null;
  sloViolationRatio: number | null;
}

/** The figures of one run. */
export interface RunScore {
  offered: number;
  served: number;
  timedOut: number;
  dropped: number;
  /** (Timed out + dropped) / offered; NaN when nothing was offered (no data, not "no violations"). */
  sloViolationRatio: number;
  /** Mean of the window FIDs (windows with none are skipped). */
  fid: number;
  meanServedScore: number;
  p50Ms: number;
  p99Ms: number;
  /** Served within the SLO per second of trace. */
  goodputQps: number;
  /** Share of served requests per route. */
  routeShares: Record<string, number>;
  windows: WindowPoint[];
}

/** Inputs of `scoreRun`. */
export interface ScoreInput {
  policy: string;
  records: readonly RequestRecord[];
  /** Plans in force over time (cascade FID); sorted by time. */
  plans: readonly PlanMark[];
  sloMs: number;
  fid: FidLookup;
  windowMs?: number;
  /** Trace span scored, ms (default 0 .. the last arrival rounded up to a second). */
  startMs?: number;
  endMs?: number;
}

/** The FID tables of a profile set: `fidAlone` per model, `fid_vs_heavy_share` per pair (linear in the share). */
export function fidLookupFromProfiles(profiles: ProfileSet): FidLookup {
  const rank = new Map(profiles.models.map((m, i) => [m.name, i]));
  const idOf = (name: string) => profiles.byName.get(name)?.referenceId ?? -1;
  return {
    rank: (m) => rank.get(m) ?? Number.MAX_SAFE_INTEGER,
    alone: (m) => profiles.byName.get(m)?.fidAlone ?? Number.NaN,
    mix(light, heavy, share) {
      const rows = profiles.reference.fidVsHeavyShare
        .filter((r) => r.lightId === idOf(light) && r.heavyId === idOf(heavy))
        .sort((a, b) => a.heavyShare - b.heavyShare);
      if (rows.length === 0) return Number.NaN;
      return interpolate(
        rows.map((r) => [r.heavyShare, r.fid]),
        share,
      );
    },
  };
}

/** Piecewise-linear interpolation over sorted points, clamped at the ends. */
export function interpolate(points: readonly (readonly [number, number])[], x: number): number {
  if (x <= points[0][0]) return points[0][1];
  for (let i = 1; i < points.length; i++) {
    const [x1, y1] = points[i];
    if (x <= x1) {
      const [x0, y0] = points[i - 1];
      return x1 === x0 ? y1 : y0 + ((y1 - y0) * (x - x0)) / (x1 - x0);
    }
  }
  return points[points.length - 1][1];
}

/** Nearest-rank percentile (0..100) of sorted values. */
export function percentileSorted(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** Whether a record violates the SLO (timed out, dropped, or answered late). */
export function violates(r: RequestRecord, sloMs: number): boolean {
  return r.outcome !== "served" || r.latencyMs === null || r.latencyMs > sloMs;
}

/** FID of the served mix: one model alone, two by heavy share; more than two: the two most served. */
export function mixFid(servedBy: ReadonlyMap<string, number>, fid: FidLookup): number | null {
  const top = [...servedBy.entries()]
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1] || fid.rank(a[0]) - fid.rank(b[0]))
    .slice(0, 2);
  if (top.length === 0) return null;
  if (top.length === 1) return fid.alone(top[0][0]);
  const [light, heavy] = [...top].sort((a, b) => fid.rank(a[0]) - fid.rank(b[0]));
  return fid.mix(light[0], heavy[0], heavy[1] / (light[1] + heavy[1]));
}

/** Time-weighted table FID of the plans in force over [fromMs, toMs), or null. */
export function planFid(plans: readonly PlanMark[], fromMs: number, toMs: number): number | null {
  let weighted = 0;
  let covered = 0;
  for (let i = 0; i < plans.length; i++) {
    const start = Math.max(fromMs, plans[i].atMs);
    const end = Math.min(toMs, i + 1 < plans.length ? plans[i + 1].atMs : Number.POSITIVE_INFINITY);
    const f = plans[i].expectedFid;
    if (end > start && f !== undefined && Number.isFinite(f)) {
      weighted += f * (end - start);
      covered += end - start;
    }
  }
  return covered > 0 ? weighted / covered : null;
}

/** Scores one run. */
export function scoreRun(input: ScoreInput): RunScore {
  const { records, sloMs } = input;
  const windowMs = input.windowMs ?? 5_000;
  const startMs = input.startMs ?? 0;
  const lastArrival = records.reduce((m, r) => Math.max(m, r.arrivalMs), startMs);
  const endMs = input.endMs ?? Math.max(startMs + 1_000, Math.ceil((lastArrival + 1) / 1000) * 1000);
  const cascade = CASCADE_POLICIES.includes(input.policy);

  const offered = records.length;
  const served = records.filter((r) => r.outcome === "served");
  const dropped = records.filter((r) => r.outcome === "dropped").length;
  const violations = records.filter((r) => violates(r, sloMs)).length;
  const latencies = served.map((r) => r.latencyMs ?? 0).sort((a, b) => a - b);
  const scores = served.map((r) => r.servedScore).filter((s): s is number => s !== undefined && Number.isFinite(s));
  const routeShares: Record<string, number> = {};
  for (const r of served) if (r.route) routeShares[r.route] = (routeShares[r.route] ?? 0) + 1 / served.length;

  const count = Math.max(1, Math.ceil((endMs - startMs) / windowMs));
  const windows: WindowPoint[] = [];
  const buckets: RequestRecord[][] = Array.from({ length: count }, () => []);
  for (const r of records) {
    const k = Math.floor((r.arrivalMs - startMs) / windowMs);
    if (k >= 0 && k < count) buckets[k].push(r);
  }
  for (let k = 0; k < count; k++) {
    const ws = startMs + k * windowMs;
    const we = Math.min(endMs, ws + windowMs);
    const bucket = buckets[k];
    let fid: number | null;
    if (cascade) fid = planFid(input.plans, ws, we);
    else {
      const by = new Map<string, number>();
      for (const r of bucket) if (r.outcome === "served" && r.servedModel) by.set(r.servedModel, (by.get(r.servedModel) ?? 0) + 1);
      fid = mixFid(by, input.fid);
    }
    windows.push({
      startMs: ws,
      demandQps: bucket.length / Math.max(0.001, (we - ws) / 1000),
      offered: bucket.length,
      fid: fid !== null && Number.isFinite(fid) ? fid : null,
      sloViolationRatio: bucket.length > 0 ? bucket.filter((r) => violates(r, sloMs)).length / bucket.length : null,
    });
  }
  const fids = windows.map((w) => w.fid).filter((f): f is number => f !== null);
  return {
    offered,
    served: served.length,
    timedOut: violations - dropped,
    dropped,
    sloViolationRatio: offered > 0 ? violations / offered : Number.NaN,
    fid: fids.length > 0 ? fids.reduce((a, b) => a + b, 0) / fids.length : Number.NaN,
    meanServedScore: scores.length > 0 ? scores.reduce((a, b) => a + b, 0) / scores.length : Number.NaN,
    p50Ms: percentileSorted(latencies, 50),
    p99Ms: percentileSorted(latencies, 99),
    goodputQps: served.filter((r) => !violates(r, sloMs)).length / ((endMs - startMs) / 1000),
    routeShares,
    windows,
  };
}
