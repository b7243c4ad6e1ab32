/**
 * Learned router benchmark, offline: for each (light, heavy) pair, the held-out ROC AUC of the
 * "hard" label (Welch's t of heavy − light image log-odds above the training median) and the
 * P(real) the cascade serves at the lookup tables' router shares, for random routing, the
 * reference weights (on the analyzer's features and on the artifact's), logistic regression on
 * the eight features, the eight plus five lexicon features, and hashed word n-grams (ridge on
 * the t statistic — the shipped model —, logistic on the label, and with the eight features
 * added); 80/20 splits by prompt text, seeds 1..n. Then the speed of the shipped scorer against
 * the analyzer's. Run: node --import tsx bench/router-learned.ts [--seeds 5] [--pairs 2:3,1:3]
 * [--passes 5]. Writes bench/results/router-learned.json.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fitLogistic, linearScore, selectL2 } from "../actors/analyzer/calibration.ts";
import {
  pairQuality,
  studyPair,
  summariseStudy,
  tablePoints,
  type ScorerFactory,
  type ScorerSummary,
} from "../actors/analyzer/difficulty-study.ts";
import { fitNgramRidge, ngramFitScore } from "../actors/analyzer/difficulty-training.ts";
import { featureVector, scoreVector } from "../actors/analyzer/score-model.ts";
import type { SparseRow } from "../actors/analyzer/sparse-linear.ts";
import { ngramRow, promptWords } from "../actors/analyzer/text-features.ts";
import { parseDiscriminatorImageScores } from "../actors/profile/reference.ts";
import { quantileSorted } from "../actors/profile/stats.ts";
import { AnalyzerScorer } from "../actors/routing/analyzer-scorer.ts";
import { ANALYZER_PATHS, loadDifficultyModel, loadPromptAnalyzer, loadSubtlexCounts } from "../services/files/analyzer-files.ts";
import { DEFAULT_PROFILES_DIR, loadProfiles } from "../services/files/profiles.ts";
import { LearnedDifficultyScorer } from "../actors/routing/learned-scorer.ts";
import { HASH_BITS, NGRAM_ORDERS, TRAIN_FRACTION } from "../services/cli/research/train-router.ts";
import { writeResult } from "./lib.ts";

const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const seeds = Array.from({ length: Number(arg("--seeds") ?? 5) }, (_, i) => i + 1);
const passes = Number(arg("--passes") ?? 5);
const profiles = loadProfiles();
const prompts = profiles.reference.prompts;
const ids = [...profiles.nameByReferenceId.keys()].sort((a, b) => a - b);
const pairs: [number, number][] = arg("--pairs")
  ? arg("--pairs")!
      .split(",")
      .map((t) => t.split(":").map(Number) as [number, number])
  : ids.flatMap((l, i) => ids.slice(i + 1).map((h) => [l, h] as [number, number]));

// Features of every prompt, computed once.
const analyzer = loadPromptAnalyzer();
const ours = prompts.map((p) => featureVector(analyzer.analyzePrompt(p).features));
const referenceScores = ours.map((v) => scoreVector(v, analyzer.scoreModel));
const referenceCsvScores = profiles.reference.features.map((v) => scoreVector(v, analyzer.scoreModel));
const words = prompts.map(promptWords);
const lexicon = lexiconFeatures();
const zScore = (rows: ArrayLike<number>[]) => {
  const d = rows[0].length;
  const mean = Array.from({ length: d }, (_, k) => rows.reduce((s, r) => s + r[k], 0) / rows.length);
  const sd = Array.from({ length: d }, (_, k) => Math.sqrt(rows.reduce((s, r) => s + (r[k] - mean[k]) ** 2, 0) / rows.length));
  return rows.map((r) => Float64Array.from({ length: d }, (_, k) => (sd[k] > 0 ? (r[k] - mean[k]) / sd[k] : 0)));
};
const z8 = zScore(ours);
const z13 = zScore(ours.map((v, i) => [...v, ...lexicon[i]]));
const ngrams = words.map((w) => ngramRow(w, HASH_BITS, NGRAM_ORDERS));
// The eight z-features as eight more columns past the hashed ones.
const ngramsPlus8: SparseRow[] = ngrams.map((r, i) => ({
  indices: Int32Array.from([...r.indices, ...Array.from({ length: 8 }, (_, k) => 2 ** HASH_BITS + k)]),
  values: Float64Array.from([...r.values, ...z8[i]]),
}));

/** Per prompt: mean and least concreteness (Brysbaert; unrated words skipped), mean and least log10 SUBTLEX count, share of words SUBTLEX lacks. */
function lexiconFeatures(): number[][] {
  const csv = readFileSync(join(DEFAULT_PROFILES_DIR, ANALYZER_PATHS.concreteness), "utf8").split(/\r?\n/);
  const header = csv[0].split(",");
  const [wordCol, ratingCol] = [header.indexOf("Word"), header.indexOf("Conc.M")];
  const concreteness = new Map<string, number>();
  for (const row of csv.slice(1)) {
    const parts = row.split(",");
    if (parts.length > ratingCol && !parts[wordCol].includes(" ")) concreteness.set(parts[wordCol].toLowerCase(), Number(parts[ratingCol]));
  }
  const counts = new Map<string, number>();
  for (const { word, count } of loadSubtlexCounts()) counts.set(word.toLowerCase(), (counts.get(word.toLowerCase()) ?? 0) + count);
  const mean = (a: number[], empty: number) => (a.length ? a.reduce((s, v) => s + v, 0) / a.length : empty);
  return words.map((ws) => {
    const c = ws.map((w) => concreteness.get(w)).filter((x): x is number => x !== undefined);
    const f = ws.map((w) => Math.log10(1 + (counts.get(w) ?? 0)));
    return [
      mean(c, 3),
      c.length ? Math.min(...c) : 3,
      mean(f, 0),
      f.length ? Math.min(...f) : 0,
      ws.length ? ws.filter((w) => !counts.has(w)).length / ws.length : 0,
    ];
  });
}

const dense =
  (x: Float64Array[]): ScorerFactory =>
  (train, labels, seed) => {
    const { l2 } = selectL2(x, labels, train, [1e-4, 1e-3, 1e-2, 1e-1, 1], 5, seed);
    const fit = fitLogistic(
      train.map((i) => x[i]),
      train.map((i) => labels[i]),
      { l2 },
    );
    return (i) => linearScore(fit, x[i]);
  };
const sparse =
  (rows: SparseRow[], target: (pair: ReturnType<typeof pairQuality>) => Float64Array, loss: "squared" | "logistic") =>
  (q: ReturnType<typeof pairQuality>): ScorerFactory =>
  (train, labels, seed) => {
    const fit = fitNgramRidge(rows, target(q), labels, train, { seed, loss });
    return (i) => ngramFitScore(fit, rows[i]);
  };

const MODELS = ["random", "reference", "referenceCsv", "lr8", "lex13", "ngram", "ngramLogistic", "ngramPlus8"] as const;
const DESCRIPTIONS: Record<(typeof MODELS)[number], string> = {
  random: "random routing",
  reference: "reference weights on the analyzer's features (the live router today)",
  referenceCsv: "reference weights on the artifact's precomputed features",
  lr8: "L2 logistic regression on the eight features",
  lex13: "L2 logistic regression on the eight features + five lexicon features",
  ngram: "ridge on t, hashed word unigrams+bigrams (shipped)",
  ngramLogistic: "L2 logistic on the label, hashed word unigrams+bigrams",
  ngramPlus8: "ridge on t, hashed n-grams + the eight features",
};

const tableRows = [...profiles.reference.paretoHybrid, ...profiles.reference.paretoRouterOnly];
const images = (id: number) =>
  parseDiscriminatorImageScores(readFileSync(join(DEFAULT_PROFILES_DIR, "reference", "discriminator", `scores_model_${id}.txt`), "utf8"));
const results: { light: string; heavy: string; points: number; seconds: number; models: Record<string, ScorerSummary> }[] = [];
const f3 = (x: { mean: number; sd: number }) => `${x.mean.toFixed(3)} ± ${x.sd.toFixed(3)}`;
for (const [l, h] of pairs) {
  const light = profiles.nameByReferenceId.get(l)!;
  const heavy = profiles.nameByReferenceId.get(h)!;
  const q = pairQuality(images(l), images(h));
  const points = tablePoints(tableRows, l, h);
  const t0 = performance.now();
  const study = studyPair({
    prompts,
    quality: q,
    points,
    seeds,
    trainFraction: TRAIN_FRACTION,
    scorers: {
      random: () => null,
      reference: () => (i) => referenceScores[i],
      referenceCsv: () => (i) => referenceCsvScores[i],
      lr8: dense(z8),
      lex13: dense(z13),
      ngram: sparse(ngrams, (x) => x.gapT, "squared")(q),
      ngramLogistic: sparse(ngrams, (x) => x.gapT, "logistic")(q),
      ngramPlus8: sparse(ngramsPlus8, (x) => x.gapT, "squared")(q),
    },
  });
  const summary = summariseStudy(study);
  const seconds = (performance.now() - t0) / 1000;
  results.push({ light, heavy, points: points.length, seconds, models: summary });
  console.log(
    `${light} → ${heavy}: held-out over ${seeds.length} splits (${seconds.toFixed(0)} s); served P(real) gain over the reference weights, mean over ${points.length} table points`,
  );
  for (const m of MODELS) {
    const s = summary[m];
    const gain =
      m === "reference" ? "" : `  gain ${s.gain.mean >= 0 ? "+" : ""}${s.gain.mean.toExponential(2)} (SE ${s.gain.se.toExponential(1)})`;
    console.log(`  ${m.padEnd(14)} AUC ${f3(s.auc)}${gain}`);
  }
}

// Speed of the shipped scorer (z-normalised per-pair model) against the analyzer's (tagging + eight features).
const model = loadDifficultyModel(join(DEFAULT_PROFILES_DIR, ANALYZER_PATHS.difficultyModel));
const analyzerScorer = new AnalyzerScorer(analyzer);
// Built without the reference list, the scorer runs the model on every prompt, as on a new prompt
// (with it, a reference prompt is a lookup of its cross-fitted score: timed apart).
const learned = new LearnedDifficultyScorer(model, analyzerScorer, []);
const crossFitted = new LearnedDifficultyScorer(model, analyzerScorer, prompts);
const pair = { light: "sd35-medium", heavy: "sd35-large" };
function timing(score: (p: string) => number) {
  let sink = 0;
  for (const p of prompts) sink += score(p); // warm-up
  const latenciesUs = new Float64Array(prompts.length * passes);
  let wallMs = 0;
  for (let pass = 0; pass < passes; pass++) {
    const start = performance.now();
    let prev = start;
    for (let i = 0; i < prompts.length; i++) {
      sink += score(prompts[i]);
      const now = performance.now();
      latenciesUs[pass * prompts.length + i] = (now - prev) * 1000;
      prev = now;
    }
    wallMs += prev - start;
  }
  latenciesUs.sort();
  if (!Number.isFinite(sink)) throw new Error("non-finite score");
  return {
    prompts: prompts.length,
    passes,
    meanUs: (wallMs * 1000) / (prompts.length * passes),
    p50Us: quantileSorted(latenciesUs, 0.5),
    p99Us: quantileSorted(latenciesUs, 0.99),
    maxUs: latenciesUs[latenciesUs.length - 1],
  };
}
// The analyzer caches nothing; a fresh prompt each call is what a router sees.
const speed = {
  learned: timing((p) => learned.score(p, pair)),
  learnedReferenceLookup: timing((p) => crossFitted.score(p, pair)),
  analyzer: timing((p) => analyzerScorer.score(p)),
};
for (const [name, s] of Object.entries(speed))
  console.log(
    `speed ${name}: mean ${s.meanUs.toFixed(2)} µs, p50 ${s.p50Us.toFixed(2)} µs, p99 ${s.p99Us.toFixed(2)} µs a prompt (${s.prompts} prompts × ${s.passes} passes)`,
  );

const path = writeResult("router-learned", {
  command: `node --import tsx bench/router-learned.ts${process.argv.slice(2).length ? " " + process.argv.slice(2).join(" ") : ""}`,
  seeds,
  trainFraction: TRAIN_FRACTION,
  label:
    "hard = Welch's t of heavy − light image log-odds (4 images each) above the training prompts' median; served = mean P(real) of the image served, router top share to heavy, discriminator escalating light images below the conf quantile",
  models: DESCRIPTIONS,
  pairs: results,
  speed,
});
console.log(`wrote ${path}`);
