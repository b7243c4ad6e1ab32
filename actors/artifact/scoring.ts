/**
 * The artifact's scoring of a run from its per-second rows: 5-row windows, (timeout + drop) /
 * total per window, an FID per window from the source the system's plot uses, a 5-point moving
 * average of both series, then their means. Follows `analysis/parse_logs.py` and
 * `analysis/plot_e1_end2end.py`.
 */
import type { LedgerRow } from "./ledger.ts";

/** Rows per plotted point (`ROWS_PER_POINT`). */
export const ROWS_PER_POINT = 5;
/** Points averaged by the plot's smoothing (`SMOOTH_WINDOW`). */
export const SMOOTH_WINDOW = 5;

/** Where a system's FID comes from (`SYSTEMS[].fid` in the plot script). */
export type FidSource = "config" | "dominant" | "mix";

/** The FID source of each policy: HADIS and its ablations log their configuration; INFaaS-Acc its dominant model; the rest their query mix. */
export function fidSourceOf(policy: string): FidSource {
  if (["hadis", "hadis-plus", "clairvoyant", "router-only", "disc-only", "fixed-pair"].includes(policy)) return "config";
  if (policy === "infaas-acc") return "dominant";
  return "mix";
}

/** FID tables by the artifact's model index (0 = lightest): single models and two-model curves at heavy shares 0, 0.1, … 1. */
export interface ArtifactFidTables {
  single: Record<number, number>;
  /** Keyed `${light},${heavy}`. */
  cascade: Record<string, number[]>;
}

/** numpy's round (half to even) to a whole number. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** `_interpolate`: a curve densified to steps of 0.05 by inserting midpoints (rounded to 2 decimals). */
export function densify(values: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < values.length - 1; i++) out.push(values[i], Math.round(((values[i] + values[i + 1]) / 2) * 100) / 100);
  out.push(values[values.length - 1]);
  return out;
}

/** Per window, the FID of the query mix (`parse_mix_fid`): the two lowest-index models in use, by the share of the second. */
export function mixFidOf(counts: readonly number[], tables: ArtifactFidTables): number {
  const total = counts.reduce((s, c) => s + c, 0);
  const shares = counts.map((c) => (total > 0 ? roundHalfEven(c / total / 0.05) * 0.05 : 0));
  const active = shares
    .map((s, i) => [s, i] as const)
    .filter(([s]) => s > 0)
    .map(([, i]) => i);
  if (active.length === 0) return tables.single[0];
  if (active.length === 1) return tables.single[active[0]];
  const [first, second] = active;
  const curve = densify(tables.cascade[`${first},${second}`] ?? []);
  const share = Math.round(shares[second] * 100) / 100;
  return curve[Math.round(share / 0.05)] ?? Number.NaN;
}

/** Per window, the FID of the model that served most (`parse_infaas_fid`). */
export function dominantFidOf(counts: readonly number[], tables: ArtifactFidTables): number {
  let best = 0;
  counts.forEach((c, i) => {
    if (c > counts[best]) best = i;
  });
  return tables.single[best];
}

/** Moving average, numpy's 'valid' mode (shorter by window − 1). */
export function smooth(series: readonly number[], window = SMOOTH_WINDOW): number[] {
  const out: number[] = [];
  for (let i = 0; i + window <= series.length; i++) out.push(series.slice(i, i + window).reduce((s, x) => s + x, 0) / window);
  return out;
}

/** One scored point of the smoothed series. */
export interface ArtifactPoint {
  /** Start of the first of the window's rows, ms (run clock). */
  startMs: number;
  sloViolationRatio: number;
  fid: number;
}

/** A run scored the artifact's way. */
export interface ArtifactScore {
  sloViolationRatio: number;
  fid: number;
  /** Rows used, from `offset`. */
  rows: number;
  offset: number;
  /** Unsmoothed per-window series. */
  windowSlo: number[];
  windowFid: number[];
  /** The smoothed series that the means are taken over. */
  points: ArtifactPoint[];
}

/**
 * Scores rows as the plot does: from the first row with an outcome, `lengthRows` rows (fewer
 * when the run has fewer, whole windows only), windows of 5, smoothing of 5, means.
 */
export function scoreArtifactRows(
  rows: readonly LedgerRow[],
  source: FidSource,
  tables: ArtifactFidTables,
  lengthRows: number,
): ArtifactScore {
  const firstServed = rows.findIndex((r) => r.total > 0);
  const offset = firstServed < 0 ? 0 : Math.min(firstServed, Math.max(rows.length - lengthRows, 0));
  const usable = Math.min(lengthRows, Math.floor((rows.length - offset) / ROWS_PER_POINT) * ROWS_PER_POINT);
  const used = rows.slice(offset, offset + usable);
  const windowSlo: number[] = [];
  const windowFid: number[] = [];
  for (let w = 0; w + ROWS_PER_POINT <= used.length; w += ROWS_PER_POINT) {
    const win = used.slice(w, w + ROWS_PER_POINT);
    const bad = win.reduce((s, r) => s + r.timeout + r.drop, 0);
    const total = win.reduce((s, r) => s + r.total, 0);
    windowSlo.push(total > 0 ? bad / total : 0);
    if (source === "config") windowFid.push(win.reduce((s, r) => s + (r.configFid ?? Number.NaN), 0) / ROWS_PER_POINT);
    else {
      const counts = win[0].arrivals.map((_, i) => win.reduce((s, r) => s + (r.arrivals[i] ?? 0), 0));
      windowFid.push(source === "mix" ? mixFidOf(counts, tables) : dominantFidOf(counts, tables));
    }
  }
  const slo = smooth(windowSlo);
  const fid = smooth(windowFid);
  const mean = (xs: number[]) => (xs.length > 0 ? xs.reduce((s, x) => s + x, 0) / xs.length : Number.NaN);
  return {
    sloViolationRatio: mean(slo),
    fid: mean(fid),
    rows: usable,
    offset,
    windowSlo,
    windowFid,
    points: slo.map((s, i) => ({ startMs: used[i * ROWS_PER_POINT]?.atMs ?? 0, sloViolationRatio: s, fid: fid[i] })),
  };
}

/** Rows the anchor experiment's plot reads at most (`--length 360`). */
export const PLOT_ROWS = 360;

/**
 * How long the artifact's controller keeps writing rows after the last query is sent: run_E1.sh
 * stops every node once the client prints TRACE ENDED (an estimate of that stop's few seconds).
 */
export const ARTIFACT_STOP_AFTER_TRACE_MS = 3_000;
