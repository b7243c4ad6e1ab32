/**
 * Learned router in the simulator, on prompts it never learned from; native fidelity, 16
 * workers, time scale 0.1, SLO 6 s, `hadis` and `router-only`, each with the analyzer's reference
 * weights, the artifact's reference features and the learned scorer. First the anchor trace as
 * `hadis sim` runs it (all 5,000 reference prompts) with the shipped model, whose scores of those
 * prompts are cross-fitted (each from the fold model that left it out), simulator seeds 1..a.
 * Then, for each held-out split (80/20 by prompt text, seeds 1..h), models fitted on the training
 * prompts only and the trace's prompt indices drawn from the held-out prompts, seeds 1..s.
 * Reports mean served discriminator score (P(real)), the routing lift (what the choice of prompts
 * added at the share sent), SLO violations and FID, and the paired learned − analyzer
 * differences. Run: node --import tsx bench/router-sim.ts
 * [--anchor-seeds 5] [--holdouts 3] [--sim-seeds 3]. Writes bench/results/router-sim.json.
 */
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { parseFidelity } from "../actors/artifact/mechanisms.ts";
import { scoreWithFidelity } from "../actors/artifact/score-run.ts";
import { pairQuality } from "../actors/analyzer/difficulty-study.ts";
import {
  fitNgramRidge,
  hardLabelsFrom,
  ngramFitScore,
  splitByPrompt,
  toDifficultyModelFile,
} from "../actors/analyzer/difficulty-training.ts";
import { ngramRow, promptWords } from "../actors/analyzer/text-features.ts";
import { parseDiscriminatorImageScores, parseTrace } from "../actors/profile/reference.ts";
import { fidLookupFromProfiles } from "../actors/sim/scoring.ts";
import { DEFAULT_TRACE, sloOf } from "../services/cli/research/e1-report.ts";
import { memoizedAnalyzer, runSimulation } from "../services/cli/research/sim.ts";
import type { SimResult } from "../actors/sim/simulator.ts";
import { referenceIndexFor } from "../actors/profile/profile-set.ts";
import { compactJson, HASH_BITS, NGRAM_ORDERS, TRAIN_FRACTION } from "../services/cli/research/train-router.ts";
import { writeTextFile } from "../services/files/analyzer-files.ts";
import { DEFAULT_PROFILES_DIR, loadProfiles } from "../services/files/profiles.ts";
import type { ScorerKind } from "../services/files/router-scoring.ts";
import { writeResult } from "./lib.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const holdouts = Array.from({ length: arg("--holdouts", 3) }, (_, i) => i + 1);
const simSeeds = Array.from({ length: arg("--sim-seeds", 3) }, (_, i) => i + 1);
const anchorSeeds = Array.from({ length: arg("--anchor-seeds", 5) }, (_, i) => i + 1);
const POLICIES = ["hadis", "router-only"];
const SCORERS: ScorerKind[] = ["analyzer", "reference", "learned"];
const timeScale = 0.1;
const workers = 16;

const profiles = loadProfiles();
const prompts = profiles.reference.prompts;
const sloMs = sloOf({ timeScale }, profiles.pool);
const arrivals = parseTrace(readFileSync(DEFAULT_TRACE, "utf8"));
const fidelity = parseFidelity("native");
const analyzer = memoizedAnalyzer();
const ids = [...profiles.nameByReferenceId.keys()].sort((a, b) => a - b);
const images = new Map(
  ids.map((id) => [
    id,
    parseDiscriminatorImageScores(readFileSync(join(DEFAULT_PROFILES_DIR, "reference", "discriminator", `scores_model_${id}.txt`), "utf8")),
  ]),
);
const rows = prompts.map((p) => ngramRow(promptWords(p), HASH_BITS, NGRAM_ORDERS));

/**
 * How well the router picked, apart from how many it sent: per pair in force, the heavy − light
 * P(real) gain of the prompts it routed straight to the heavy model, less what as many prompts
 * drawn at random from that pair's arrivals would gain; summed and divided by the arrivals.
 * A router that sends a larger share raises served P(real) by that alone; this does not move.
 */
function routingLift(run: SimResult, promptList: readonly string[]): { routingLift: number; heavyRouted: number } {
  const perPair = new Map<string, { n: number; k: number; gainAll: number; gainRouted: number }>();
  let plan = 0;
  let routed = 0;
  arrivals.forEach((a, i) => {
    while (plan + 1 < run.plans.length && run.plans[plan + 1].atMs <= a.atMs) plan++;
    const pair = run.plans[plan]?.pair;
    const record = run.records[i];
    if (!pair || pair.light === pair.heavy || !record.route) return;
    const row = referenceIndexFor(profiles, promptList[a.promptIdx % promptList.length]).index;
    const gain = profiles.reference.scores.get(pair.heavy)![row] - profiles.reference.scores.get(pair.light)![row];
    const key = `${pair.light}→${pair.heavy}`;
    const s = perPair.get(key) ?? { n: 0, k: 0, gainAll: 0, gainRouted: 0 };
    s.n++;
    s.gainAll += gain;
    if (record.route === "heavy") {
      s.k++;
      s.gainRouted += gain;
      routed++;
    }
    perPair.set(key, s);
  });
  let lift = 0;
  for (const s of perPair.values()) lift += s.gainRouted - (s.k * s.gainAll) / s.n;
  return { routingLift: lift / arrivals.length, heavyRouted: routed / arrivals.length };
}

interface Run {
  holdout: number;
  simSeed: number;
  policy: string;
  scorer: ScorerKind;
  meanServedScore: number;
  /** `routingLift`: served P(real) the router's choice of prompts added, at the share it sent. */
  routingLift: number;
  /** Share of arrivals the router sent straight to the heavy model. */
  heavyRouted: number;
  sloViolationRatio: number;
  fid: number;
  routeShares: Record<string, number>;
  swaps: number;
}
const runs: Run[] = [];
const simulateOnce = async (
  holdout: number,
  promptList: readonly string[],
  policy: string,
  simSeed: number,
  scorer: ScorerKind,
  modelPath?: string,
) => {
  const run = await runSimulation({
    policy,
    profiles,
    analyzer,
    arrivals,
    prompts: promptList,
    workers,
    sloMs,
    timeScale,
    seed: simSeed,
    purgeFinished: true,
    fidelity,
    scorer,
    ...(modelPath ? { difficultyModel: modelPath } : {}),
  });
  const score = scoreWithFidelity({
    policy,
    records: run.records,
    plans: run.plans,
    sloMs,
    fid: fidLookupFromProfiles(profiles),
    fidelity,
    rows: run.rows,
    profiles,
  });
  runs.push({
    holdout,
    simSeed,
    policy,
    scorer,
    meanServedScore: score.meanServedScore,
    ...routingLift(run, promptList),
    sloViolationRatio: score.sloViolationRatio,
    fid: score.fid,
    routeShares: score.routeShares,
    swaps: run.swaps,
  });
};
// Holdout 0: the anchor trace over all reference prompts, the shipped (cross-fitted) model.
for (const policy of POLICIES)
  for (const simSeed of anchorSeeds) for (const scorer of SCORERS) await simulateOnce(0, prompts, policy, simSeed, scorer);
console.log(`anchor trace, all ${prompts.length} prompts: ${POLICIES.length * anchorSeeds.length * SCORERS.length} runs`);
for (const holdout of holdouts) {
  const { train, test } = splitByPrompt(prompts, TRAIN_FRACTION, holdout);
  const entries = ids.flatMap((l, i) =>
    ids.slice(i + 1).map((h) => {
      const q = pairQuality(images.get(l)!, images.get(h)!);
      const fit = fitNgramRidge(rows, q.gapT, hardLabelsFrom(q.gapT, train), train, { seed: 1 });
      return {
        light: profiles.nameByReferenceId.get(l)!,
        heavy: profiles.nameByReferenceId.get(h)!,
        fit,
        referenceScores: rows.map((r) => ngramFitScore(fit, r)),
        use: true,
      };
    }),
  );
  const modelPath = join(".hadis", "router-sim", `difficulty-model-holdout${holdout}.json`);
  writeTextFile(
    modelPath,
    compactJson(
      toDifficultyModelFile(entries, HASH_BITS, NGRAM_ORDERS, `bench/router-sim.ts: fitted on the training prompts of split ${holdout}`),
    ),
  );
  const heldOut = test.map((i) => prompts[i]);
  for (const policy of POLICIES)
    for (const simSeed of simSeeds) for (const scorer of SCORERS) await simulateOnce(holdout, heldOut, policy, simSeed, scorer, modelPath);
  console.log(`held-out split ${holdout}: ${heldOut.length} prompts simulated`);
}

const stats = (v: number[]) => {
  const mean = v.reduce((s, x) => s + x, 0) / v.length;
  const sd = Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / Math.max(1, v.length - 1));
  return { mean, sd, se: sd / Math.sqrt(v.length), n: v.length };
};
const summarise = (section: Run[], policy: string) => {
  const of = (scorer: ScorerKind) => section.filter((r) => r.policy === policy && r.scorer === scorer);
  const bySc = Object.fromEntries(
    SCORERS.map((s) => [
      s,
      {
        meanServedScore: stats(of(s).map((r) => r.meanServedScore)),
        routingLift: stats(of(s).map((r) => r.routingLift)),
        heavyRouted: stats(of(s).map((r) => r.heavyRouted)),
        sloViolationRatio: stats(of(s).map((r) => r.sloViolationRatio)),
        fid: stats(of(s).map((r) => r.fid)),
        swaps: stats(of(s).map((r) => r.swaps)),
      },
    ]),
  );
  const base = of("analyzer");
  const paired = of("learned").map((r, k) => ({
    served: r.meanServedScore - base[k].meanServedScore,
    lift: r.routingLift - base[k].routingLift,
    violations: r.sloViolationRatio - base[k].sloViolationRatio,
    fid: r.fid - base[k].fid,
  }));
  return {
    policy,
    runs: of("analyzer").length,
    scorers: bySc,
    learnedMinusAnalyzer: {
      meanServedScore: stats(paired.map((p) => p.served)),
      routingLift: stats(paired.map((p) => p.lift)),
      sloViolationRatio: stats(paired.map((p) => p.violations)),
      fid: stats(paired.map((p) => p.fid)),
    },
  };
};
const sections = {
  anchor: {
    description: `anchor trace over all ${prompts.length} reference prompts, shipped model (cross-fitted scores), simulator seeds ${anchorSeeds.join(", ")}`,
    summary: POLICIES.map((p) =>
      summarise(
        runs.filter((r) => r.holdout === 0),
        p,
      ),
    ),
  },
  heldOut: {
    description: `anchor trace over the held-out prompts of splits ${holdouts.join(", ")}, models fitted on the rest, simulator seeds ${simSeeds.join(", ")}`,
    summary: POLICIES.map((p) =>
      summarise(
        runs.filter((r) => r.holdout > 0),
        p,
      ),
    ),
  },
};
for (const [name, section] of Object.entries(sections))
  for (const s of section.summary) {
    console.log(`${name}, ${s.policy} (${s.runs} runs: ${section.description}):`);
    for (const sc of SCORERS) {
      const x = s.scorers[sc];
      console.log(
        `  ${sc.padEnd(9)} served P(real) ${x.meanServedScore.mean.toFixed(5)} ± ${x.meanServedScore.sd.toFixed(5)}  routing lift ${x.routingLift.mean.toFixed(5)} at ${(100 * x.heavyRouted.mean).toFixed(1)}% routed heavy  violations ${x.sloViolationRatio.mean.toFixed(5)}  FID ${x.fid.mean.toFixed(3)} ± ${x.fid.sd.toFixed(3)}  swaps ${x.swaps.mean.toFixed(1)}`,
      );
    }
    const d = s.learnedMinusAnalyzer;
    console.log(
      `  learned − analyzer: served ${d.meanServedScore.mean >= 0 ? "+" : ""}${d.meanServedScore.mean.toFixed(5)} (SE ${d.meanServedScore.se.toFixed(5)}), routing lift ${d.routingLift.mean >= 0 ? "+" : ""}${d.routingLift.mean.toFixed(5)} (SE ${d.routingLift.se.toFixed(5)}), violations ${d.sloViolationRatio.mean.toExponential(1)}, FID ${d.fid.mean.toFixed(3)}`,
    );
  }
const path = writeResult("router-sim", {
  command: `node --import tsx bench/router-sim.ts${process.argv.slice(2).length ? " " + process.argv.slice(2).join(" ") : ""}`,
  trace: "profiles/reference/traces/azure_1to64qps.txt (prompt index i → held-out prompt i mod count)",
  fidelity: "native",
  workers,
  timeScale,
  sloMs,
  holdouts,
  simSeeds,
  anchorSeeds,
  sections,
  runs,
});
console.log(`wrote ${path}`);
