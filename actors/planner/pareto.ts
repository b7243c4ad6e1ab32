/**
 * The offline Pareto step: prune the full configuration grid to the configurations no other
 * configuration beats on both quality (FID) and cost, and compare with a reference table.
 */
import type { GridRow, ParetoRow } from "../profile/reference.ts";

/** What a configuration costs: its heavy share or its mean per-query latency. */
export type ParetoCost = "heavyShare" | "latency";
/** Whether configurations compete within their pair or across all pairs. */
export type ParetoScope = "pair" | "global";

/** How to build a front. */
export interface FrontOptions {
  cost: ParetoCost;
  scope: ParetoScope;
  /**
   * "weak" (default): a row is dropped when another is no worse on both and better on one.
   * "strict": dropped only when another is strictly cheaper and strictly better, so rows tied
   * on cost all stay (rows tied on cost and FID keep the lowest heavy share).
   */
  dominance?: "weak" | "strict";
}

const costOf = (r: GridRow, cost: ParetoCost) => (cost === "latency" ? r.latencyS : r.heavyShare);
const pairKey = (r: { lightId: number; heavyId: number }) => `${r.lightId}→${r.heavyId}`;

/** Identity of a configuration: pair and both thresholds, at the tables' 0.01 precision. */
export function configKey(r: Pick<ParetoRow, "lightId" | "heavyId" | "routerThreshold" | "discThreshold">): string {
  return `${r.lightId},${r.heavyId},${r.routerThreshold.toFixed(2)},${r.discThreshold.toFixed(2)}`;
}

/** Whether `a` dominates `b`: no worse on FID and cost, strictly better on one. */
export function dominates(a: GridRow, b: GridRow, cost: ParetoCost): boolean {
  const ca = costOf(a, cost);
  const cb = costOf(b, cost);
  return a.fid <= b.fid && ca <= cb && (a.fid < b.fid || ca < cb);
}

/**
 * Non-dominated rows of `grid` (FID vs cost), per pair or across pairs; rows equal on both keep
 * the first (lowest router share). Sorted by FID ascending like the reference tables.
 */
export function paretoFront(grid: GridRow[], options: FrontOptions): GridRow[] {
  const groups = new Map<string, GridRow[]>();
  for (const r of grid) {
    const key = options.scope === "pair" ? pairKey(r) : "all";
    const list = groups.get(key) ?? [];
    list.push(r);
    groups.set(key, list);
  }
  const out: GridRow[] = [];
  for (const rows of groups.values()) {
    // Sweep by cost ascending (FID ascending on ties): keep a row when its FID beats every
    // cheaper one; under strict dominance "cheaper" means strictly cheaper.
    const sorted = [...rows].sort(
      (a, b) =>
        costOf(a, options.cost) - costOf(b, options.cost) ||
        a.fid - b.fid ||
        a.heavyShare - b.heavyShare ||
        b.routerThreshold - a.routerThreshold,
    );
    let bestFid = Number.POSITIVE_INFINITY;
    let i = 0;
    while (i < sorted.length) {
      let j = i;
      while (j < sorted.length && costOf(sorted[j], options.cost) === costOf(sorted[i], options.cost)) j++;
      const tier = sorted.slice(i, j);
      if (options.dominance === "strict") {
        const seenFid = new Set<number>();
        for (const r of tier) {
          if (r.fid < bestFid && !seenFid.has(r.fid)) out.push(r);
          seenFid.add(r.fid);
        }
      } else if (tier[0].fid < bestFid) out.push(tier[0]);
      bestFid = Math.min(bestFid, tier[0].fid);
      i = j;
    }
  }
  return out.sort((a, b) => a.fid - b.fid || pairKey(a).localeCompare(pairKey(b)));
}

/** Row-by-row comparison of a computed front with a reference table. */
export interface FrontComparison {
  options: FrontOptions;
  computed: number;
  reference: number;
  matched: ParetoRow[];
  /** On the computed front only, with the reference row (same pair) that is cheaper-or-equal and better-or-equal, if any. */
  onlyComputed: ParetoRow[];
  /** In the reference only, each with the computed-front row that dominates it (if any). */
  onlyReference: { row: ParetoRow; dominatedBy?: GridRow; inGrid: boolean }[];
}

/** Converts grid rows to table rows. */
export function toParetoRows(rows: GridRow[]): ParetoRow[] {
  return rows.map(({ lightId, heavyId, routerThreshold, discThreshold, heavyShare, fid }) => ({
    lightId,
    heavyId,
    routerThreshold,
    discThreshold,
    heavyShare,
    fid,
  }));
}

/** Compares the front computed from `grid` with `reference` by configuration identity. */
export function compareFront(grid: GridRow[], reference: ParetoRow[], options: FrontOptions): FrontComparison {
  const front = paretoFront(grid, options);
  const frontKeys = new Set(front.map(configKey));
  const refKeys = new Set(reference.map(configKey));
  const gridByKey = new Map(grid.map((r) => [configKey(r), r]));
  const onlyReference = reference
    .filter((r) => !frontKeys.has(configKey(r)))
    .map((row) => {
      const g = gridByKey.get(configKey(row));
      const scopeRows = front.filter((f) => options.scope === "global" || pairKey(f) === pairKey(row));
      const dominatedBy = g ? scopeRows.find((f) => dominates(f, g, options.cost)) : undefined;
      return { row, dominatedBy, inGrid: g !== undefined };
    });
  return {
    options,
    computed: front.length,
    reference: reference.length,
    matched: reference.filter((r) => frontKeys.has(configKey(r))),
    onlyComputed: toParetoRows(front.filter((r) => !refKeys.has(configKey(r)))),
    onlyReference,
  };
}

/** CSV text of table rows in the reference column order. */
export function paretoCsv(rows: ParetoRow[]): string {
  const lines = ["light_model,heavy_model,router_thres,conf_thres,heavy_share,fid"];
  for (const r of rows) lines.push([r.lightId, r.heavyId, r.routerThreshold, r.discThreshold, r.heavyShare, r.fid].join(","));
  return lines.join("\n") + "\n";
}
