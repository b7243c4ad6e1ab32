/**
 * `hadis pareto`: the offline Pareto step. Prunes the 726-row configuration grid to its
 * Pareto front, compares it with the reference `pareto_hybrid.csv`, prints the comparison and
 * writes the computed front as CSV.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { compareFront, paretoCsv, paretoFront, toParetoRows, type FrontOptions } from "../../../actors/planner/pareto.ts";
import { loadProfiles } from "../../files/profiles.ts";
import { packagePath } from "../../files/package-root.ts";

/** Where the computed front goes by default. */
export const DEFAULT_PARETO_OUT = packagePath("bench/results/pareto_hybrid.csv");

/** The front construction that reproduces the reference table (see actors/planner/README.md). */
export const REFERENCE_FRONT: FrontOptions = { cost: "latency", scope: "global", dominance: "strict" };

const fmtRow = (r: {
  lightId: number;
  heavyId: number;
  routerThreshold: number;
  discThreshold: number;
  heavyShare: number;
  fid: number;
  latencyS?: number;
}) =>
  `${r.lightId}→${r.heavyId} r=${r.routerThreshold} d=${r.discThreshold} share=${r.heavyShare}${r.latencyS !== undefined ? ` lat=${r.latencyS}s` : ""} fid=${r.fid}`;

/** Runs the Pareto step and prints the comparison; writes the CSV to `args.out`. */
export async function paretoCommand(args: { out?: string }): Promise<void> {
  const profiles = loadProfiles();
  const { configGrid, paretoHybrid } = profiles.reference;
  console.log(`config grid: ${configGrid.length} configurations; reference pareto_hybrid: ${paretoHybrid.length} rows`);
  console.log("front construction                 computed  matched  only-computed  only-reference");
  for (const cost of ["latency", "heavyShare"] as const) {
    for (const scope of ["global", "pair"] as const) {
      for (const dominance of ["strict", "weak"] as const) {
        const c = compareFront(configGrid, paretoHybrid, { cost, scope, dominance });
        const label = `${cost}/${scope}/${dominance}`.padEnd(34);
        console.log(
          `${label} ${String(c.computed).padStart(8)} ${String(c.matched.length).padStart(8)} ${String(c.onlyComputed.length).padStart(14)} ${String(c.onlyReference.length).padStart(15)}`,
        );
      }
    }
  }
  const best = compareFront(configGrid, paretoHybrid, REFERENCE_FRONT);
  const gridKey = (r: { lightId: number; heavyId: number; routerThreshold: number; discThreshold: number }) =>
    `${r.lightId},${r.heavyId},${r.routerThreshold},${r.discThreshold}`;
  const gridBy = new Map(configGrid.map((r) => [gridKey(r), r]));
  console.log(
    `\n${REFERENCE_FRONT.cost}/${REFERENCE_FRONT.scope}/${REFERENCE_FRONT.dominance}: ${best.matched.length} of ${best.reference} reference rows match`,
  );
  for (const o of best.onlyReference) {
    const g = gridBy.get(gridKey(o.row));
    const twin = g && configGrid.find((x) => x !== g && x.latencyS === g.latencyS && x.fid === g.fid);
    const why = !o.inGrid
      ? "not in the grid"
      : o.dominatedBy
        ? `dominated by ${fmtRow(o.dominatedBy)}`
        : twin
          ? `tied on latency and FID with ${fmtRow(twin)} (the grid's 2-decimal values cannot order them)`
          : "kept by the reference for a reason the grid does not show";
    console.log(`  reference only: ${fmtRow(g ?? o.row)} — ${why}`);
  }
  for (const r of best.onlyComputed) {
    const g = gridBy.get(gridKey(r));
    const twin = g && configGrid.find((x) => x !== g && x.latencyS === g.latencyS && x.fid === g.fid);
    const why = twin ? `tied with ${fmtRow(twin)}` : "non-dominated in the grid (the reference's unrounded latencies may differ)";
    console.log(`  computed only:  ${fmtRow(g ?? r)} — ${why}`);
  }
  const out = resolve(args.out ?? DEFAULT_PARETO_OUT);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, paretoCsv(toParetoRows(paretoFront(configGrid, REFERENCE_FRONT))));
  console.log(`\nwrote ${out}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf("--out");
  await paretoCommand({ out: i > 0 ? process.argv[i + 1] : undefined });
}
