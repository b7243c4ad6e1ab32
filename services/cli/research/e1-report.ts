/**
 * The anchor experiment's report, shared by the simulator (`hadis sim`) and the live replayer
 * (`hadis bench e1`): trace and prompt loading, the per-system summary, the table, the JSON file
 * and the Figure 7-style plots.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import Table from "cli-table3";
import { parsePrompts, parseTrace, type Arrival } from "../../../actors/profile/reference.ts";
import type { RunScore } from "../../../actors/sim/scoring.ts";
import { POLICY_NAMES } from "../../../actors/planner/policies.ts";
import { PACKAGE_ROOT, packagePath } from "../../files/package-root.ts";
import { readRoute, Routes } from "../../../contracts/messages.ts";

/** Where the benchmark results go. */
export const RESULTS_DIR = packagePath("bench", "results");
/** The anchor trace and prompts. */
export const DEFAULT_TRACE = packagePath("profiles/reference/traces/azure_1to64qps.txt");
export const DEFAULT_PROMPTS = packagePath("profiles/reference/prompts/imagenet1k_captions_5k.txt");

/** Options both commands take. */
export interface E1Options {
  trace: string;
  prompts: string;
  policy: string;
  /** Default: the pool's SLO at `timeScale` (`sloOf`). */
  sloMs?: number;
  workers: number;
  timeScale: number;
  /** The simulator's seed (`hadis sim` only). */
  seed?: number;
  json?: string;
  plots?: boolean;
  /** `native` (default) or `artifact`. */
  fidelity?: string;
  /** Artifact mechanisms turned on (or `-name` off) on top of the fidelity. */
  mechanisms?: string;
}

/** One system's figures in the JSON report: its run score (less the served count) plus swaps and plans. */
export type SystemSummary = Omit<RunScore, "served"> & {
  name: string;
  /** The fidelity it ran under (`native`, `artifact`, or the mechanisms on). */
  fidelity?: string;
  /** How the headline figures were computed: pooled by arrival, or the artifact's windows. */
  scoring?: "pooled" | "artifact";
  /** Pooled figures, when the headline ones are the artifact's. */
  pooled?: { sloViolationRatio: number; fid: number };
  swaps: number;
  /** Plans adopted during the run (trace clock), for reading why the configuration changed. */
  plans?: PlanLog[];
};

/** One adopted plan as the report keeps it. */
export interface PlanLog {
  atMs: number;
  epoch: number;
  pair: string;
  expectedFid?: number;
  degraded: number;
  reason: string;
}

/** A run's latency objective: `--slo-ms`, else the pool's SLO at the run's time scale (60 s × 0.1 = 6,000 ms). */
export function sloOf(opts: Pick<E1Options, "sloMs" | "timeScale">, pool: { sloMs: number }): number {
  return opts.sloMs ?? pool.sloMs * opts.timeScale;
}

/** The policies `--policy` names (`all` = the nine). */
export function policiesFor(policy: string): string[] {
  if (policy === "all") return [...ORDER];
  if (policy === "clairvoyant") return [policy];
  if (!(POLICY_NAMES as readonly string[]).includes(policy))
    throw new Error(`unknown policy "${policy}" (known: all, ${POLICY_NAMES.join(", ")})`);
  return [policy];
}

/** The six systems of the paper first, then the ablations. */
const ORDER = [
  "clipper-light",
  "clipper-heavy",
  "infaas-acc",
  "proteus",
  "diffserve",
  "hadis",
  "router-only",
  "disc-only",
  "fixed-pair",
  "hadis-plus",
];

/** Reads the trace and the prompts. */
export function loadWorkload(opts: Pick<E1Options, "trace" | "prompts">): { arrivals: Arrival[]; prompts: string[] } {
  const arrivals = parseTrace(readFileSync(opts.trace, "utf8"));
  const prompts = parsePrompts(readFileSync(opts.prompts, "utf8"));
  if (prompts.length === 0) throw new Error(`no prompts in ${opts.prompts}`);
  return { arrivals, prompts };
}

/** A summary from a run's score. */
export function summarize(
  name: string,
  score: RunScore & Partial<Pick<SystemSummary, "fidelity" | "scoring" | "pooled">>,
  swaps: number,
  plans?: PlanLog[],
): SystemSummary {
  return {
    plans,
    name,
    ...(score.fidelity ? { fidelity: score.fidelity, scoring: score.scoring } : {}),
    ...(score.pooled ? { pooled: score.pooled } : {}),
    sloViolationRatio: score.sloViolationRatio,
    fid: score.fid,
    meanServedScore: score.meanServedScore,
    p50Ms: score.p50Ms,
    p99Ms: score.p99Ms,
    goodputQps: score.goodputQps,
    swaps,
    routeShares: score.routeShares,
    offered: score.offered,
    timedOut: score.timedOut,
    dropped: score.dropped,
    windows: score.windows,
  };
}

const f = (x: number, d: number) => (Number.isFinite(x) ? x.toFixed(d) : "–");

/** The results table. */
export function renderTable(systems: readonly SystemSummary[], colour = process.stdout.isTTY === true): string {
  const table = new Table({
    head: ["system", "SLO viol.", "FID", "score", "p50 ms", "p99 ms", "goodput qps", "swaps", "light / heavy / l→h"],
    // Colours for a terminal only: written to a file or a pipe they were escape codes.
    ...(colour ? {} : { style: { head: [], border: [] } }),
  });
  for (const s of systems) {
    // (A report written before routes were ASCII names the escalated one with an arrow.)
    const shares: Record<string, number> = {};
    for (const [route, x] of Object.entries(s.routeShares)) shares[readRoute(route)] = (shares[readRoute(route)] ?? 0) + x;
    const share = (k: string) => f((shares[k] ?? 0) * 100, 0);
    table.push([
      s.name,
      f(s.sloViolationRatio, 4),
      f(s.fid, 2),
      f(s.meanServedScore, 4),
      f(s.p50Ms, 0),
      f(s.p99Ms, 0),
      f(s.goodputQps, 2),
      String(s.swaps),
      `${share("light")} / ${share("heavy")} / ${share(Routes.lightThenHeavy)} %`,
    ]);
  }
  return table.toString();
}

const REPO_ROOT = `${PACKAGE_ROOT}/`;

/** A file as a report names it: relative to the repository when inside it, so a committed report names no machine's directories. */
export function reportPath(file: string): string {
  const inRepo = relative(REPO_ROOT, resolve(file));
  return inRepo.startsWith("..") || isAbsolute(inRepo) ? file : inRepo;
}

/** Writes the JSON report; `full` keeps the per-window series. */
export function writeReport(
  file: string,
  report: { trace: string; sloMs: number; workers?: number; systems: SystemSummary[] } & Record<string, unknown>,
): string {
  const path = resolve(file);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify({ ...report, trace: reportPath(report.trace) }, null, 2) + "\n");
  return path;
}

/** Writes the Figure 7 plots (over time, and bars per system) as PNG; returns their paths. */
export async function writePlots(systems: readonly SystemSummary[], prefix: string, title: string): Promise<string[]> {
  const { timeSeriesSpec, barsSpec, renderPng } = await import("./charts.ts");
  mkdirSync(RESULTS_DIR, { recursive: true });
  const over = join(RESULTS_DIR, `${prefix}-over-time.png`);
  const bars = join(RESULTS_DIR, `${prefix}-bars.png`);
  writeFileSync(over, await renderPng(timeSeriesSpec(systems, title)));
  writeFileSync(bars, await renderPng(barsSpec(systems, title)));
  return [over, bars];
}
