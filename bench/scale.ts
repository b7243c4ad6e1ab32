/**
 * Scale: the anchor trace at 62.5x its rate (64 -> 4,000 qps peak) on 1,000 simulated workers,
 * with the real 4-model pool and a synthetic 8-model pool, policies hadis and hadis-plus. Every
 * MILP solve and every control tick is timed (wall ms; the simulator solves inline, so that is
 * the planner's whole cost) and set against the control tick interval.
 *
 *   node --import tsx bench/scale.ts [--workers 1000] [--from S] [--seconds N] [--pools 4,8] [--policies hadis,hadis-plus]
 *
 * `--workers 16` runs the anchor itself (rate x1) for comparison; it writes bench/results/scale-16.json.
 *
 * Each (pool, policy) runs in its own child process (`--run POOL POLICY`) so its peak RSS is its
 * own. Prints a markdown table and writes bench/results/scale.json.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import type { ModelProfile } from "../contracts/profile.ts";
import { NATIVE } from "../actors/artifact/mechanisms.ts";
import { scoreWithFidelity } from "../actors/artifact/score-run.ts";
import { controlTick } from "../actors/control/reconcile.ts";
import { paretoFront, toParetoRows } from "../actors/planner/pareto.ts";
import { buildProfileSet, type ProfileSet } from "../actors/profile/profile-set.ts";
import { parsePrompts, parseTrace, type Arrival, type GridRow } from "../actors/profile/reference.ts";
import { mulberry32 } from "../actors/profile/stats.ts";
import { fidLookupFromProfiles } from "../actors/sim/scoring.ts";
import { DEFAULT_PROMPTS, DEFAULT_TRACE } from "../services/cli/research/e1-report.ts";
import { REFERENCE_FRONT } from "../services/cli/research/pareto.ts";
import { memoizedAnalyzer, runSimulation } from "../services/cli/research/sim.ts";
import { loadProfiles } from "../services/files/profiles.ts";
import { percentile, writeResult } from "./lib.ts";

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
/** Simulated workers (default 1,000; `--workers 16` is the anchor itself, for comparison). */
const WORKERS = Number(arg("workers", "1000"));
/** The trace's rate over the anchor's: 16 workers carry the anchor, so 1,000 carry 62.5x (64 -> 4,000 qps). */
const RATE_FACTOR = WORKERS / 16;
const SLO_MS = 6_000;
const TIME_SCALE = 0.1;
/** The live control tick at this time scale (`services/system.ts`, `sim-state.ts`: max(500, 20 s × time scale)). */
const TICK_MS = Math.max(500, 20_000 * TIME_SCALE);

/** The trace window, trace seconds: by default the whole anchor (347 s). */
const FROM_S = Number(arg("from", "0"));
const SECONDS = Number(arg("seconds", "347"));

/**
 * The anchor trace in [fromMs, toMs) at `factor` times its rate, shifted to start at 0. Each
 * arrival becomes ⌊factor⌋ or ⌈factor⌉ arrivals (alternating to the exact mean), spread uniformly
 * over the gap to the next original arrival, so the rate's shape is the anchor's at its own
 * resolution; copies after the first take other prompts (a fixed stride through the prompt list).
 */
export function scaleTrace(
  arrivals: readonly Arrival[],
  opts: { factor: number; fromMs: number; toMs: number; promptCount: number; seed: number },
): Arrival[] {
  const rand = mulberry32(opts.seed);
  const inWindow = arrivals.filter((a) => a.atMs >= opts.fromMs && a.atMs < opts.toMs);
  const meanGapMs = (opts.toMs - opts.fromMs) / Math.max(1, inWindow.length);
  const out: Arrival[] = [];
  let owed = 0;
  inWindow.forEach((a, i) => {
    const gapMs = i + 1 < inWindow.length ? inWindow[i + 1].atMs - a.atMs : meanGapMs;
    owed += opts.factor;
    const copies = Math.floor(owed);
    owed -= copies;
    for (let j = 0; j < copies; j++) {
      const atMs = a.atMs - opts.fromMs + (j === 0 ? 0 : rand() * gapMs);
      out.push({ atMs: Math.round(atMs * 1000) / 1000, promptIdx: (a.promptIdx + j * 1_009) % opts.promptCount });
    }
  });
  return out.sort((x, y) => x.atMs - y.atMs);
}

/** Where the synthetic models sit on the real ladder (0 sdxl-lightning, 1 sd35-large-turbo, 2 sd35-medium, 3 sd35-large). */
const SYNTHETIC_POSITIONS = [0.5, 4 / 3, 5 / 3, 2.5];

/**
 * The real pool plus four SYNTHETIC models interpolated between neighbours on the quality ladder:
 * latency per batch geometric, FID alone, load time and each prompt's discriminator score linear.
 * Pairs of two real models keep the measured config grid; any pair with a synthetic model gets the
 * grid `bench/solver.ts` uses (FID eased between the two models' FID alone as the heavy share
 * grows), and the tables are the global Pareto front of the whole grid, built as the real one is.
 */
export function syntheticEightPool(real: ProfileSet): ProfileSet {
  const ladder = real.models; // pool order is the quality ladder, light to heavy
  const lerp = (a: number, b: number, f: number) => a + (b - a) * f;
  const scoresById = new Map<number, Float64Array>();
  for (const m of ladder) scoresById.set(m.referenceId!, real.reference.scores.get(m.name)!);
  const position = new Map<string, number>(ladder.map((m, i) => [m.name, i]));
  const synthetic: ModelProfile[] = SYNTHETIC_POSITIONS.map((pos, i) => {
    const lo = ladder[Math.floor(pos)];
    const hi = ladder[Math.floor(pos) + 1];
    const f = pos - Math.floor(pos);
    const latencyMsByBatch: Record<string, number> = {};
    for (const b of Object.keys(lo.latencyMsByBatch))
      latencyMsByBatch[b] = Math.round(Math.pow(lo.latencyMsByBatch[b], 1 - f) * Math.pow(hi.latencyMsByBatch[b], f));
    const name = `synthetic-${pos.toFixed(2).replace(".", "_")}`;
    const id = ladder.length + i;
    const sl = real.reference.scores.get(lo.name)!;
    const sh = real.reference.scores.get(hi.name)!;
    scoresById.set(
      id,
      sl.map((x, k) => lerp(x, sh[k], f)),
    );
    position.set(name, pos);
    return {
      name,
      referenceId: id,
      displayName: `SYNTHETIC ${lo.name}..${hi.name} at ${f.toFixed(2)}`,
      latencyMsByBatch,
      fidAlone: Math.round(lerp(lo.fidAlone!, hi.fidAlone!, f) * 100) / 100,
      loadMs: Math.round(lerp(lo.loadMs, hi.loadMs, f)),
      unloadMs: Math.round(lerp(lo.unloadMs, hi.unloadMs, f)),
      source: "synthetic (bench/scale.ts): interpolated between its two real neighbours; not a measured model",
    };
  });
  const models = [...ladder, ...synthetic].sort((a, b) => position.get(a.name)! - position.get(b.name)!);
  const realIds = new Set(ladder.map((m) => m.referenceId!));
  const grid: GridRow[] = real.reference.configGrid.filter((r) => realIds.has(r.lightId) && realIds.has(r.heavyId));
  const fidVsHeavyShare = [...real.reference.fidVsHeavyShare];
  for (let l = 0; l < models.length; l++) {
    for (let h = l + 1; h < models.length; h++) {
      const [ml, mh] = [models[l], models[h]];
      if (realIds.has(ml.referenceId!) && realIds.has(mh.referenceId!)) continue;
      const [fl, fh] = [ml.fidAlone!, mh.fidAlone!];
      const [el, eh] = [ml.latencyMsByBatch["1"] / 1000, mh.latencyMsByBatch["1"] / 1000];
      for (let ri = 0; ri <= 10; ri++) {
        for (let di = 0; di <= 10; di++) {
          const [r, d] = [ri / 10, di / 10];
          const share = r + (1 - r) * d;
          // Routing and escalation pick hard prompts, so the heavy share buys more than its linear worth.
          const fid =
            Math.round((fh + (fl - fh) * Math.pow(1 - share, 1.6) - 0.3 * Math.sin(Math.PI * share) * (0.5 + 0.5 * r)) * 100) / 100;
          const row = {
            lightId: ml.referenceId!,
            heavyId: mh.referenceId!,
            routerThreshold: r,
            discThreshold: d,
            heavyShare: Math.round(share * 100) / 100,
            latencyS: Math.round(((1 - r) * el + share * eh) * 100) / 100,
            fid,
          };
          grid.push(row);
          if (ri === 0) fidVsHeavyShare.push({ lightId: row.lightId, heavyId: row.heavyId, heavyShare: row.heavyShare, fid });
        }
      }
    }
  }
  const front = (rows: GridRow[]) => toParetoRows(paretoFront(rows, REFERENCE_FRONT));
  return buildProfileSet({
    pool: { ...real.pool, name: "synthetic-8 (4 real + 4 interpolated)", models: models.map((m) => m.name) },
    models,
    prompts: real.reference.prompts,
    features: real.reference.features,
    scoresById,
    paretoHybrid: front(grid),
    paretoRouterOnly: front(grid.filter((r) => r.discThreshold === 0)),
    paretoDiscOnly: front(grid.filter((r) => r.routerThreshold === 0)),
    configGrid: grid,
    fidVsHeavyShare,
  });
}

/** Median, p95 and max of a list of ms, and its length. */
function summary(ms: number[]) {
  return ms.length === 0
    ? { count: 0, medianMs: Number.NaN, p95Ms: Number.NaN, maxMs: Number.NaN }
    : { count: ms.length, medianMs: percentile(ms, 50), p95Ms: percentile(ms, 95), maxMs: Math.max(...ms) };
}

/** What one child run reports. */
interface RunResult {
  pool: string;
  models: number;
  tableRows: number;
  policy: string;
  workers: number;
  requests: number;
  /** Peak of the 10 s mean rate (the anchor's "64 qps" is this kind of peak: 63 qps in 200-210 s). */
  peakQps: number;
  /** Peak of any one second. */
  peakQps1s: number;
  traceSeconds: number;
  sloViolationRatio: number;
  fid: number;
  swaps: number;
  plans: number;
  ticks: number;
  /** `firstMs`: the run's first solve (cold HiGHS); `maxAt`: which solve was the slowest (0-based). */
  solve: ReturnType<typeof summary> & {
    statuses: Record<string, number>;
    overTick: number;
    solverMedianMs: number;
    firstMs: number;
    maxAt: number;
  };
  tick: ReturnType<typeof summary> & { overTick: number };
  tickMs: number;
  simWallS: number;
  peakRssMib: number;
  unfinished: number;
}

/** The workload of this invocation (same in every child: deterministic). */
function workload(promptCount: number): Arrival[] {
  const anchor = parseTrace(readFileSync(DEFAULT_TRACE, "utf8"));
  return scaleTrace(anchor, { factor: RATE_FACTOR, fromMs: FROM_S * 1000, toMs: (FROM_S + SECONDS) * 1000, promptCount, seed: 1 });
}

/** Peak arrival rate over windows of `windowS` seconds, qps. */
function peakQps(arrivals: readonly Arrival[], windowS: number): number {
  const perWindow = new Map<number, number>();
  for (const a of arrivals) {
    const k = Math.floor(a.atMs / 1000 / windowS);
    perWindow.set(k, (perWindow.get(k) ?? 0) + 1);
  }
  return Math.max(...perWindow.values()) / windowS;
}

/** One (pool, policy) run, in this (child) process. */
async function runOne(poolName: string, policy: string): Promise<RunResult> {
  const real = loadProfiles();
  const profiles = poolName === "8" ? syntheticEightPool(real) : real;
  const prompts = parsePrompts(readFileSync(DEFAULT_PROMPTS, "utf8"));
  const arrivals = workload(prompts.length);
  const solveMs: number[] = [];
  const solverMs: number[] = [];
  const statuses: Record<string, number> = {};
  const tickWallMs: number[] = [];
  const started = performance.now();
  const sim = await runSimulation({
    policy,
    profiles,
    analyzer: memoizedAnalyzer(),
    arrivals,
    prompts,
    workers: WORKERS,
    sloMs: SLO_MS,
    timeScale: TIME_SCALE,
    seed: 1,
    onSolve(wallMs, solution) {
      solveMs.push(wallMs);
      solverMs.push(solution.solveMs);
      statuses[solution.status] = (statuses[solution.status] ?? 0) + 1;
    },
    // The whole control tick (snapshot, build, solve, assignment, damping), timed around the real one.
    control: async (...args) => {
      const t0 = performance.now();
      const outcome = await controlTick(...args);
      tickWallMs.push(performance.now() - t0);
      return outcome;
    },
  });
  const simWallS = (performance.now() - started) / 1000;
  const score = scoreWithFidelity({
    policy,
    records: sim.records,
    plans: sim.plans,
    sloMs: SLO_MS,
    fid: fidLookupFromProfiles(profiles),
    fidelity: NATIVE,
    rows: sim.rows,
    profiles,
  });
  return {
    pool: poolName === "8" ? "synthetic 8-model" : "real 4-model",
    models: profiles.models.length,
    tableRows: profiles.reference.paretoHybrid.length,
    policy,
    workers: WORKERS,
    requests: arrivals.length,
    peakQps: peakQps(arrivals, 10),
    peakQps1s: peakQps(arrivals, 1),
    traceSeconds: SECONDS,
    sloViolationRatio: score.sloViolationRatio,
    fid: score.fid,
    swaps: sim.swaps,
    plans: sim.plans.length,
    ticks: sim.ticks,
    solve: {
      ...summary(solveMs),
      statuses,
      overTick: solveMs.filter((x) => x > TICK_MS).length,
      firstMs: solveMs[0] ?? Number.NaN,
      maxAt: solveMs.indexOf(Math.max(...solveMs)),
      solverMedianMs: percentile(solverMs, 50),
    },
    tick: { ...summary(tickWallMs), overTick: tickWallMs.filter((x) => x > TICK_MS).length },
    tickMs: TICK_MS,
    simWallS,
    peakRssMib: process.resourceUsage().maxRSS / 1024,
    unfinished: sim.unfinished,
  };
}

/** Runs every (pool, policy) in a child process and reports. */
async function main(): Promise<void> {
  const pools = arg("pools", "4,8").split(",");
  const policies = arg("policies", "hadis,hadis-plus").split(",");
  const self = fileURLToPath(import.meta.url);
  const results: RunResult[] = [];
  const startedAll = performance.now();
  for (const pool of pools) {
    for (const policy of policies) {
      const t0 = performance.now();
      const child = spawnSync(
        process.execPath,
        [
          "--import",
          "tsx",
          self,
          "--run",
          pool,
          policy,
          "--workers",
          String(WORKERS),
          "--from",
          String(FROM_S),
          "--seconds",
          String(SECONDS),
        ],
        { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, stdio: ["ignore", "pipe", "inherit"] },
      );
      const line = child.stdout.split("\n").find((l) => l.startsWith("RESULT "));
      if (child.status !== 0 || !line) throw new Error(`run ${pool}/${policy} failed (exit ${child.status}): ${child.stdout.slice(-2000)}`);
      const r = JSON.parse(line.slice("RESULT ".length)) as RunResult;
      results.push(r);
      process.stderr.write(
        `${r.pool} ${policy}: ${((performance.now() - t0) / 1000).toFixed(0)} s child wall, sim ${r.simWallS.toFixed(0)} s, ` +
          `solve median ${r.solve.medianMs.toFixed(1)} ms, max ${r.solve.maxMs.toFixed(1)} ms, RSS ${r.peakRssMib.toFixed(0)} MiB\n`,
      );
    }
  }
  const f = (x: number, d: number) => (Number.isFinite(x) ? x.toFixed(d) : "–");
  console.log(
    "| pool | policy | workers | peak QPS (10 s / 1 s) | requests | SLO violation ratio | FID | swaps | solves | solve ms median / p95 / max | tick wall ms median / max | tick ms | sim wall s | peak RSS MiB |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const r of results)
    console.log(
      `| ${r.pool} (${r.tableRows} rows) | ${r.policy} | ${r.workers} | ${f(r.peakQps, 0)} / ${r.peakQps1s} | ${r.requests} | ${f(r.sloViolationRatio, 4)} | ${f(r.fid, 2)} | ${r.swaps} | ${r.solve.count} | ${f(r.solve.medianMs, 1)} / ${f(r.solve.p95Ms, 1)} / ${f(r.solve.maxMs, 1)} | ${f(r.tick.medianMs, 1)} / ${f(r.tick.maxMs, 1)} | ${r.tickMs} | ${f(r.simWallS, 1)} | ${f(r.peakRssMib, 0)} |`,
    );
  const keepsUp = results.every((r) => r.solve.maxMs < r.tickMs && r.tick.maxMs < r.tickMs);
  console.log(`\nplanner keeps up (every solve and every whole control tick under the ${TICK_MS} ms tick): ${keepsUp ? "yes" : "NO"}`);
  const path = writeResult(WORKERS === 1_000 ? "scale" : `scale-${WORKERS}`, {
    measuredAt: new Date().toISOString(),
    node: process.version,
    command: `node --import tsx bench/scale.ts --workers ${WORKERS} --from ${FROM_S} --seconds ${SECONDS} --pools ${pools.join(",")} --policies ${policies.join(",")}`,
    trace: `profiles/reference/traces/azure_1to64qps.txt, seconds ${FROM_S}-${FROM_S + SECONDS}, rate x${RATE_FACTOR} (each arrival copied ⌊x⌋ or ⌈x⌉ times, copies spread over the gap to the next arrival, other prompts), shifted to start at 0`,
    syntheticPool:
      "4 real models + 4 SYNTHETIC ones interpolated between neighbours (positions 0.5, 1.33, 1.67, 2.5 on the real ladder); built in bench/scale.ts",
    workers: WORKERS,
    sloMs: SLO_MS,
    timeScale: TIME_SCALE,
    tickMs: TICK_MS,
    fidelity: "native",
    keepsUp,
    totalWallS: (performance.now() - startedAll) / 1000,
    results,
  });
  console.log(`wrote ${path}`);
}

// Run only as the entry point (the pool and trace builders are importable).
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const runAt = process.argv.indexOf("--run");
  if (runAt > 0) {
    const r = await runOne(process.argv[runAt + 1], process.argv[runAt + 2]);
    process.stdout.write(`RESULT ${JSON.stringify(r)}\n`);
  } else {
    await main();
  }
}
