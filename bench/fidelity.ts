/**
 * The anchor experiment under both fidelities, on the simulator (deterministic; wall time only
 * varies with the machine):
 *
 *   node --import tsx bench/fidelity.ts mechanisms   each artifact mechanism alone on our design, and
 *                                                    each left out of the artifact, on the anchor trace
 *   node --import tsx bench/fidelity.ts artifact     the artifact fidelity on the anchor trace and on
 *                                                    hourly-shape traces of other QPS ranges and seeds
 *   node --import tsx bench/fidelity.ts sweep        our design swept in load (32-128 QPS peaks): every
 *                                                    policy, a quality/SLO frontier per load
 *   node --import tsx bench/fidelity.ts plus         hadis-plus against HADIS and the clairvoyant bound
 *   node --import tsx bench/fidelity.ts ablation     hadis-plus's changes, each added to HADIS and each
 *                                                    left out of hadis-plus
 *   node --import tsx bench/fidelity.ts held-out     hadis-plus against HADIS on 20 traces (seeds 2-5)
 *   node --import tsx bench/fidelity.ts fresh        the same on seeds 6-9
 *   node --import tsx bench/fidelity.ts unseen       the same on seeds 10-13
 *   node --import tsx bench/fidelity.ts unseen-2     the same on seeds 22-25, held out from every choice
 *   node --import tsx bench/fidelity.ts unseen-3     the same on seeds 26-29, held out from every choice
 *   node --import tsx bench/fidelity.ts artifact-unseen  the same under the artifact's fidelity on seeds
 *                                                    14-21, with the anchor under each seed's dispatch
 *   node --import tsx bench/fidelity.ts artifact-unseen-2  the same on seeds 30-37, held out from every choice
 *
 * Each writes bench/results/fidelity-<name>.json and prints a markdown table.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ARTIFACT, ARTIFACT_MECHANISMS, NATIVE, fidelityOf, type Fidelity } from "../actors/artifact/mechanisms.ts";
import { scoreWithFidelity } from "../actors/artifact/score-run.ts";
import { parseHourlyInvocations, stepTrace, traceFromHourly } from "../actors/sim/trace.ts";
import { fidLookupFromProfiles } from "../actors/sim/scoring.ts";
import { parsePrompts, parseTrace, type Arrival } from "../actors/profile/reference.ts";
import { frontierSpec, renderPng, type FrontierPoint } from "../services/cli/research/charts.ts";
import { DEFAULT_PROMPTS, DEFAULT_TRACE, RESULTS_DIR } from "../services/cli/research/e1-report.ts";
import { memoizedAnalyzer, runSimulation } from "../services/cli/research/sim.ts";
import { loadProfiles } from "../services/files/profiles.ts";
import type { ScorerKind } from "../services/files/scorer-kinds.ts";
import { writeResult } from "./lib.ts";
import { hadisPlusDecision, type HadisPlusVariant } from "../actors/planner/hadis-plus.ts";
import type { PlannerPolicy } from "../actors/planner/policies.ts";

const SIX = ["clipper-light", "clipper-heavy", "infaas-acc", "proteus", "diffserve", "hadis"];
const NINE = [...SIX, "router-only", "disc-only", "fixed-pair"];
const HOURLY = join(RESULTS_DIR, "../../profiles/reference/traces/azure_invocations_hourly.csv");

const profiles = loadProfiles();
const prompts = parsePrompts(readFileSync(DEFAULT_PROMPTS, "utf8"));
const analyzer = memoizedAnalyzer();
const hourly = parseHourlyInvocations(readFileSync(HOURLY, "utf8"));

/** One workload: a name and its arrivals. */
interface Workload {
  name: string;
  arrivals: Arrival[];
}

const anchor: Workload = { name: "anchor (azure_1to64qps)", arrivals: parseTrace(readFileSync(DEFAULT_TRACE, "utf8")) };
/** A trace of the hourly Azure shape over 347 s (the anchor's length), peaking at `maxQps`, the minimum at 1/64 of it. */
const hourlyTrace = (maxQps: number, seed: number): Workload => ({
  name: `hourly 1/64..${maxQps} qps seed ${seed}`,
  arrivals: traceFromHourly(hourly, { minQps: maxQps / 64, maxQps, seconds: 347, seed, promptCount: prompts.length }),
});

/** One policy's figures. */
interface Cell {
  policy: string;
  sloViolationRatio: number;
  fid: number;
  pooled?: { sloViolationRatio: number; fid: number };
  swaps: number;
  /** Mean discriminator score (P(real)) of the images served. */
  meanServedScore: number;
  /** Images served degraded: a rejected light image served as the deadline neared (any policy), or (hadis-plus) a rejected or hard prompt's light image, no time for the heavy model. */
  degraded: number;
}

/**
 * A policy to run: its name, or (the ablation) a label for a policy run with another scorer or
 * with the deadline-aware cascade turned on or off apart from it.
 */
type PolicySpec =
  string | { label: string; policy: string; scorer?: ScorerKind; deadlineAware?: boolean; fitBatches?: boolean; planner?: PlannerPolicy };

/** hadis-plus's planner with a part left out. */
const plusPlanner =
  (variant: HadisPlusVariant): PlannerPolicy =>
  (s, p, solve) =>
    hadisPlusDecision(s, p, p.reference.paretoHybrid, solve, variant);

async function run(workload: Workload, specs: readonly PolicySpec[], fidelity: Fidelity, seed = 1): Promise<Cell[]> {
  const cells: Cell[] = [];
  for (const spec of specs) {
    const { label, policy, ...variant } = typeof spec === "string" ? { label: spec, policy: spec } : spec;
    const sim = await runSimulation({
      policy,
      ...variant,
      profiles,
      analyzer,
      arrivals: workload.arrivals,
      prompts,
      workers: 16,
      sloMs: 6_000,
      timeScale: 0.1,
      seed,
      fidelity,
    });
    const s = scoreWithFidelity({
      policy,
      records: sim.records,
      plans: sim.plans,
      sloMs: 6_000,
      fid: fidLookupFromProfiles(profiles),
      fidelity,
      rows: sim.rows,
      profiles,
    });
    cells.push({
      policy: label,
      sloViolationRatio: s.sloViolationRatio,
      fid: s.fid,
      ...(s.pooled ? { pooled: s.pooled } : {}),
      swaps: sim.swaps,
      meanServedScore: s.meanServedScore,
      degraded: sim.records.filter((r) => r.fallback === "degraded").length,
    });
  }
  process.stderr.write(
    `${workload.name}, ${fidelity.name}, seed ${seed}: ${cells.map((c) => `${c.policy} ${c.sloViolationRatio.toFixed(4)}/${c.fid.toFixed(2)}`).join(", ")}\n`,
  );
  return cells;
}

const f4 = (x: number) => (Number.isFinite(x) ? x.toFixed(4) : "–");
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "–");
const byName = (cells: Cell[], p: string) => cells.find((c) => c.policy === p)!;

/** Each mechanism alone on our design, and each left out of the artifact. */
async function mechanisms(): Promise<void> {
  const rows: { config: string; cells: Cell[] }[] = [];
  rows.push({ config: "native", cells: await run(anchor, NINE, NATIVE) });
  for (const m of ARTIFACT_MECHANISMS) rows.push({ config: `native + ${m}`, cells: await run(anchor, NINE, fidelityOf([m])) });
  rows.push({ config: "artifact", cells: await run(anchor, NINE, ARTIFACT) });
  for (const m of ARTIFACT_MECHANISMS)
    rows.push({ config: `artifact − ${m}`, cells: await run(anchor, NINE, fidelityOf(ARTIFACT_MECHANISMS.filter((x) => x !== m))) });
  console.log(`| configuration | ${SIX.join(" | ")} |\n|---|${SIX.map(() => "---").join("|")}|`);
  for (const r of rows)
    console.log(
      `| ${r.config} | ${SIX.map((p) => `${f4(byName(r.cells, p).sloViolationRatio)} / ${f2(byName(r.cells, p).fid)}`).join(" | ")} |`,
    );
  console.log(
    `wrote ${writeResult("fidelity-mechanisms", { trace: "profiles/reference/traces/azure_1to64qps.txt", workers: 16, sloMs: 6_000, timeScale: 0.1, cell: "SLO violation ratio / FID", rows })}`,
  );
}

/** The paper's claims, checked on one workload's artifact-fidelity cells. */
function claims(cells: Cell[]) {
  const h = byName(cells, "hadis");
  const ratio = (p: string) => byName(cells, p).sloViolationRatio / h.sloViolationRatio;
  return {
    diffserveRatio: ratio("diffserve"),
    proteusRatio: ratio("proteus"),
    infaasRatio: ratio("infaas-acc"),
    hadisFidLowest: ["diffserve", "proteus", "infaas-acc"].every((p) => h.fid < byName(cells, p).fid),
    clipperLightFid: byName(cells, "clipper-light").fid,
  };
}

/** The artifact fidelity on the anchor trace and on hourly traces of other ranges and seeds. */
async function artifact(): Promise<void> {
  const workloads = [anchor];
  for (const q of [48, 64, 80]) for (const seed of [1, 2, 3]) workloads.push(hourlyTrace(q, seed));
  const results: { workload: string; simSeed: number; arrivals: number; cells: Cell[]; claims: ReturnType<typeof claims> }[] = [];
  // The simulator's seed draws the random dispatch: the anchor trace under five of them.
  for (const simSeed of [1, 2, 3, 4, 5]) {
    const cells = await run(anchor, SIX, ARTIFACT, simSeed);
    results.push({
      workload: `${anchor.name}, dispatch seed ${simSeed}`,
      simSeed,
      arrivals: anchor.arrivals.length,
      cells,
      claims: claims(cells),
    });
  }
  for (const w of workloads.slice(1)) {
    const cells = await run(w, SIX, ARTIFACT);
    results.push({ workload: w.name, simSeed: 1, arrivals: w.arrivals.length, cells, claims: claims(cells) });
  }
  console.log(
    "| trace | HADIS | DiffServe | Proteus | INFaaS-Acc | Clipper-Light FID | DiffServe ÷ HADIS | Proteus ÷ HADIS | INFaaS ÷ HADIS | HADIS lowest FID |\n|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const r of results) {
    const c = (p: string) => `${f4(byName(r.cells, p).sloViolationRatio)} / ${f2(byName(r.cells, p).fid)}`;
    console.log(
      `| ${r.workload} | ${c("hadis")} | ${c("diffserve")} | ${c("proteus")} | ${c("infaas-acc")} | ${f2(r.claims.clipperLightFid)} | ${r.claims.diffserveRatio.toFixed(1)}x | ${r.claims.proteusRatio.toFixed(1)}x | ${r.claims.infaasRatio.toFixed(1)}x | ${r.claims.hadisFidLowest ? "yes" : "no"} |`,
    );
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const summary = {
    runs: results.length,
    median: {
      diffserve: med(results.map((r) => r.claims.diffserveRatio)),
      proteus: med(results.map((r) => r.claims.proteusRatio)),
      infaas: med(results.map((r) => r.claims.infaasRatio)),
    },
    atLeast: {
      diffserve27: results.filter((r) => r.claims.diffserveRatio >= 2.7).length,
      proteus4: results.filter((r) => r.claims.proteusRatio >= 4).length,
      infaas8: results.filter((r) => r.claims.infaasRatio >= 8).length,
      hadisFidLowest: results.filter((r) => r.claims.hadisFidLowest).length,
      clipperLight2976: results.filter((r) => Math.abs(r.claims.clipperLightFid - 29.76) < 1e-9).length,
    },
  };
  console.log(
    `\n${summary.runs} runs: median DiffServe ÷ HADIS ${summary.median.diffserve.toFixed(1)}x (≥ 2.7x in ${summary.atLeast.diffserve27}), Proteus ${summary.median.proteus.toFixed(1)}x (≥ 4x in ${summary.atLeast.proteus4}), INFaaS-Acc ${summary.median.infaas.toFixed(1)}x (≥ 8x in ${summary.atLeast.infaas8}); HADIS lowest FID in ${summary.atLeast.hadisFidLowest}; Clipper-Light at 29.76 in ${summary.atLeast.clipperLight2976}`,
  );
  console.log(
    `wrote ${writeResult("fidelity-artifact", { fidelity: "artifact", workers: 16, sloMs: 6_000, timeScale: 0.1, cell: "SLO violation ratio / FID", summary, results })}`,
  );
}

/** Whether HADIS is dominated: another policy with ≥ 0.005 fewer violations and ≥ 0.1 lower FID. */
function dominators(cells: Cell[]): string[] {
  const h = byName(cells, "hadis");
  return cells
    .filter((c) => c.policy !== "hadis" && c.sloViolationRatio <= h.sloViolationRatio - 0.005 && c.fid <= h.fid - 0.1)
    .map((c) => c.policy);
}

/** Our design swept in load. */
async function sweep(): Promise<void> {
  const results: { maxQps: number; seed: number; arrivals: number; cells: Cell[]; hadisDominatedBy: string[] }[] = [];
  const points: FrontierPoint[] = [];
  for (const q of [32, 64, 96, 128]) {
    for (const seed of [1, 2]) {
      const w = hourlyTrace(q, seed);
      const cells = await run(w, NINE, NATIVE);
      results.push({ maxQps: q, seed, arrivals: w.arrivals.length, cells, hadisDominatedBy: dominators(cells) });
      if (seed === 1)
        for (const c of cells) points.push({ system: c.policy, panel: `peak ${q} qps`, violation: c.sloViolationRatio, fid: c.fid });
    }
  }
  console.log(`| peak qps (seed) | ${NINE.join(" | ")} | HADIS dominated by |\n|---|${NINE.map(() => "---").join("|")}|---|`);
  for (const r of results)
    console.log(
      `| ${r.maxQps} (${r.seed}) | ${NINE.map((p) => `${f4(byName(r.cells, p).sloViolationRatio)} / ${f2(byName(r.cells, p).fid)}`).join(" | ")} | ${r.hadisDominatedBy.join(", ") || "none"} |`,
    );
  const png = join(RESULTS_DIR, "frontier-native-sweep.png");
  writeFileSync(png, await renderPng(frontierSpec(points, "native fidelity: FID against SLO violation ratio per policy (seed 1)")));
  console.log(`wrote ${png}`);
  console.log(
    `wrote ${writeResult("fidelity-sweep", { fidelity: "native", workers: 16, sloMs: 6_000, timeScale: 0.1, traces: "hourly Azure shape, 347 s, min = peak / 64", cell: "SLO violation ratio / FID", results })}`,
  );
}

/** hadis-plus against HADIS and the clairvoyant bound: the anchor, the load sweep's traces and a step in demand, both fidelities. */
/** hadis-plus's workloads: the anchor, the load sweep's peaks, and a step in demand. */
function plusWorkloads(): Workload[] {
  return [
    anchor,
    ...[32, 64, 96, 128].map((q) => hourlyTrace(q, 1)),
    {
      name: "step 8 -> 48 qps at 120 s, 300 s",
      arrivals: stepTrace({ lowQps: 8, highQps: 48, stepAtS: 120, seconds: 300, seed: 1, promptCount: prompts.length }),
    },
  ];
}

/** The issue's three claims for hadis-plus (`p`) against HADIS (`h`): violations halved where HADIS has any (else a lower FID at none), FID not worse, fewer swaps. */
function claimsMet(h: Cell, p: Cell): { violations: boolean; fid: boolean; swaps: boolean } {
  const violations = h.sloViolationRatio > 0 ? p.sloViolationRatio <= h.sloViolationRatio / 2 : p.sloViolationRatio === 0 && p.fid < h.fid;
  return { violations, fid: p.fid <= h.fid, swaps: p.swaps < h.swaps };
}

/** How the plus table names a claim not met. */
const CLAIM_WORDS: Record<string, string> = { violationsHalvedOrFidLower: "violations", fidNotWorse: "FID", fewerSwaps: "swaps" };

async function plus(): Promise<void> {
  const workloads = plusWorkloads();
  const results: { workload: string; fidelity: string; cells: Cell[]; verdict: Record<string, boolean | number> }[] = [];
  for (const fidelity of [NATIVE, ARTIFACT]) {
    for (const w of workloads) {
      // The clairvoyant bound is our design's (policyFor refuses it under the artifact's demand signal).
      const names = fidelity.on.has("demand") ? ["hadis", "hadis-plus"] : ["hadis", "hadis-plus", "clairvoyant"];
      const cells = await run(w, names, fidelity);
      const [h, p] = ["hadis", "hadis-plus"].map((n) => byName(cells, n));
      const c = cells.find((x) => x.policy === "clairvoyant");
      const met = claimsMet(h, p);
      results.push({
        workload: w.name,
        fidelity: fidelity.name,
        cells,
        verdict: {
          violationsHalvedOrFidLower: met.violations,
          fidNotWorse: met.fid,
          fewerSwaps: met.swaps,
          ...(c ? { fidGapToBound: Number((p.fid - c.fid).toFixed(3)) } : {}),
        },
      });
    }
  }
  console.log(
    "| fidelity | trace | hadis | hadis-plus | clairvoyant | swaps h / + / c | served P(real) h / + | degraded (+) | claims met |\n|---|---|---|---|---|---|---|---|---|",
  );
  for (const r of results) {
    const c = (n: string) => byName(r.cells, n);
    const has = (n: string) => r.cells.some((x) => x.policy === n);
    const f = (n: string) => (has(n) ? `${f4(c(n).sloViolationRatio)} / ${f2(c(n).fid)}` : "n/a");
    const met =
      r.verdict.violationsHalvedOrFidLower && r.verdict.fidNotWorse && r.verdict.fewerSwaps
        ? "all"
        : Object.entries(r.verdict)
            .filter(([k, v]) => k !== "fidGapToBound" && !v)
            .map(([k]) => `not ${CLAIM_WORDS[k] ?? k}`)
            .join(", ");
    console.log(
      `| ${r.fidelity} | ${r.workload} | ${f("hadis")} | ${f("hadis-plus")} | ${f("clairvoyant")} | ${c("hadis").swaps} / ${c("hadis-plus").swaps} / ${has("clairvoyant") ? c("clairvoyant").swaps : "n/a"} | ${c("hadis").meanServedScore.toFixed(4)} / ${c("hadis-plus").meanServedScore.toFixed(4)} | ${c("hadis-plus").degraded} | ${met} |`,
    );
  }
  console.log(
    `wrote ${writeResult("fidelity-plus", { workers: 16, sloMs: 6_000, timeScale: 0.1, cell: "SLO violation ratio / FID", results })}`,
  );
}

/**
 * hadis-plus's three changes (its planner: swaps priced, backlogs drained and read as cleared, the safe or bold plan,
 * `actors/planner/hadis-plus.ts`; the learned router; the deadline-aware cascade, with its
 * workers' fitted batches), each added to HADIS alone and each left out of hadis-plus, on
 * hadis-plus's workloads; and the planner's and the cascade's parts each left out.
 */
const ABLATION: PolicySpec[] = [
  "hadis",
  { label: "hadis + learned", policy: "hadis", scorer: "learned" },
  { label: "hadis + deadline", policy: "hadis", deadlineAware: true },
  { label: "hadis + planner", policy: "hadis-plus", scorer: "analyzer", deadlineAware: false },
  { label: "plus − planner", policy: "hadis", scorer: "learned", deadlineAware: true },
  { label: "plus − learned", policy: "hadis-plus", scorer: "analyzer" },
  { label: "plus − deadline", policy: "hadis-plus", deadlineAware: false },
  { label: "plus − drain", policy: "hadis-plus", planner: plusPlanner({ drain: false }) },
  { label: "plus − bold on a fall", policy: "hadis-plus", planner: plusPlanner({ boldOnFall: false }) },
  { label: "plus − backlog waits", policy: "hadis-plus", planner: plusPlanner({ backlogWaits: false }) },
  { label: "plus − slow fall", policy: "hadis-plus", planner: plusPlanner({ slowFall: false }) },
  { label: "plus − fitted batches", policy: "hadis-plus", fitBatches: false },
  { label: "plus, safe solve only", policy: "hadis-plus", planner: plusPlanner({ solves: "safe" }) },
  { label: "plus, bold solve only", policy: "hadis-plus", planner: plusPlanner({ solves: "bold" }) },
  "hadis-plus",
];

async function ablation(): Promise<void> {
  const labels = ABLATION.map((a) => (typeof a === "string" ? a : a.label));
  const results: { workload: string; fidelity: string; cells: Cell[] }[] = [];
  for (const fidelity of [NATIVE, ARTIFACT])
    for (const w of plusWorkloads()) results.push({ workload: w.name, fidelity: fidelity.name, cells: await run(w, ABLATION, fidelity) });
  console.log(`| fidelity | trace | ${labels.join(" | ")} |\n|---|---|${labels.map(() => "---").join("|")}|`);
  for (const r of results) {
    const cell = (l: string) => {
      const c = byName(r.cells, l);
      return `${f4(c.sloViolationRatio)} / ${f2(c.fid)} / ${c.swaps}`;
    };
    console.log(`| ${r.fidelity} | ${r.workload} | ${labels.map(cell).join(" | ")} |`);
  }
  console.log(
    `wrote ${writeResult("fidelity-ablation", { workers: 16, sloMs: 6_000, timeScale: 0.1, cell: "SLO violation ratio / FID / swaps", results })}`,
  );
}

/**
 * hadis-plus against HADIS on traces it was not built on: the load sweep's peaks and the step,
 * native fidelity. `held-out`: seeds 2-5 (its first version was built looking at seed 1; its
 * planner's two-solve rule was chosen looking at these too); `fresh`: seeds 6-9, looked at by
 * nobody before they were first run (its fitted batches and bold plan on a fall were then chosen
 * looking at seeds 1-9); `unseen`: seeds 10-13, first run on the code that has both (its backlog
 * waits were then found on seeds 7 and 12); `unseen-2`: seeds 22-25, first run on the code with
 * them (its slow fall was then chosen looking at seeds 1-3 in both fidelities); `unseen-3`: seeds
 * 26-29, first run on the code with the slow fall, held out from every choice. Per trace, the
 * issue's three claims; in total, the violations summed and the medians of the differences.
 * `artifact-unseen`: the artifact's fidelity on seeds 14-21, with the anchor trace under each
 * seed's random dispatch; hadis-plus's batch tie-break under per-worker queues was chosen looking
 * at seeds 1-5 there (seeds 14-17 had been run once, with an earlier form of it; 18-21 never);
 * `artifact-unseen-2`: seeds 30-37, first run on the code with the slow fall.
 */
async function heldOut(seeds: readonly number[] = [2, 3, 4, 5], result = "fidelity-held-out", fidelity: Fidelity = NATIVE): Promise<void> {
  const rows: { workload: string; hadis: Cell; plus: Cell; claims: { violations: boolean; fid: boolean; swaps: boolean } }[] = [];
  for (const seed of seeds) {
    const anchored = fidelity !== NATIVE ? [{ ...anchor, name: `${anchor.name}, dispatch seed ${seed}` }] : [];
    const workloads: Workload[] = [
      ...anchored,
      ...[32, 64, 96, 128].map((q) => hourlyTrace(q, seed)),
      {
        name: `step 8 -> 48 qps at 120 s seed ${seed}`,
        arrivals: stepTrace({ lowQps: 8, highQps: 48, stepAtS: 120, seconds: 300, seed, promptCount: prompts.length }),
      },
    ];
    for (const w of workloads) {
      const [h, p] = await run(w, ["hadis", "hadis-plus"], fidelity, anchored.includes(w) ? seed : 1);
      rows.push({ workload: w.name, hadis: h, plus: p, claims: claimsMet(h, p) });
    }
  }
  console.log("| trace | hadis | hadis-plus | swaps h / + | claims met |\n|---|---|---|---|---|");
  for (const r of rows) {
    const met = Object.entries(r.claims)
      .filter(([, ok]) => ok)
      .map(([k]) => k);
    console.log(
      `| ${r.workload} | ${f4(r.hadis.sloViolationRatio)} / ${f2(r.hadis.fid)} | ${f4(r.plus.sloViolationRatio)} / ${f2(r.plus.fid)} | ${r.hadis.swaps} / ${r.plus.swaps} | ${met.length === 3 ? "all" : met.join(", ") || "none"} |`,
    );
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const count = (k: "violations" | "fid" | "swaps") => rows.filter((r) => r.claims[k]).length;
  const summary = {
    traces: rows.length,
    allClaims: rows.filter((r) => r.claims.violations && r.claims.fid && r.claims.swaps).length,
    violationsClaim: count("violations"),
    fidNotWorse: count("fid"),
    fewerSwaps: count("swaps"),
    violationSum: {
      hadis: rows.reduce((a, r) => a + r.hadis.sloViolationRatio, 0),
      plus: rows.reduce((a, r) => a + r.plus.sloViolationRatio, 0),
    },
    medianFidDelta: median(rows.map((r) => r.plus.fid - r.hadis.fid)),
    medianSwapDelta: median(rows.map((r) => r.plus.swaps - r.hadis.swaps)),
  };
  console.log(JSON.stringify(summary));
  console.log(`wrote ${writeResult(result, { workers: 16, sloMs: 6_000, timeScale: 0.1, fidelity: fidelity.name, seeds, summary, rows })}`);
}

const commands: Record<string, () => Promise<void>> = {
  mechanisms,
  artifact,
  sweep,
  plus,
  ablation,
  "held-out": () => heldOut(),
  fresh: () => heldOut([6, 7, 8, 9], "fidelity-fresh"),
  unseen: () => heldOut([10, 11, 12, 13], "fidelity-unseen"),
  "unseen-2": () => heldOut([22, 23, 24, 25], "fidelity-unseen-2"),
  "artifact-unseen": () => heldOut([14, 15, 16, 17, 18, 19, 20, 21], "fidelity-artifact-unseen", ARTIFACT),
  "unseen-3": () => heldOut([26, 27, 28, 29], "fidelity-unseen-3"),
  "artifact-unseen-2": () => heldOut([30, 31, 32, 33, 34, 35, 36, 37], "fidelity-artifact-unseen-2", ARTIFACT),
};
const name = process.argv[2] ?? "";
if (!commands[name]) {
  console.error(`usage: node --import tsx bench/fidelity.ts ${Object.keys(commands).join("|")}`);
  process.exit(2);
}
const started = performance.now();
await commands[name]();
console.error(`${name}: ${((performance.now() - started) / 1000).toFixed(0)} s wall`);
