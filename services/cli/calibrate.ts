/**
 * `hadis calibrate`: learns router weights from measured quality. A prompt is hard for a
 * (light, heavy) pair when the heavy model's discriminator-score gain over the light one is
 * above the median gain of the training prompts; logistic regression on the analyzer's
 * z-normalised features predicts that, and is compared on held-out prompts with the reference
 * weights and random routing (ROC AUC, and mean served score at 10 % routed to heavy).
 * Also `deriveAnalyzerDataCommand`, which regenerates the analyzer's derived data files.
 */
import { join } from "node:path";
import { exactMatchRate, pearson } from "../../actors/analyzer/agreement.ts";
import { fitLogistic, hardLabels, lightFailsLabels, median, mulberry32, rocAuc, servedQuality, splitRows } from "../../actors/analyzer/calibration.ts";
import { isRare, rarityKey } from "../../actors/analyzer/features.ts";
import { formatRarityOverrides } from "../../actors/analyzer/lexicons.ts";
import { fitRarityOverrides } from "../../actors/analyzer/rarity-fit.ts";
import { retag } from "../../actors/analyzer/retag.ts";
import { featureVector, fitNormalisation, scoreVector, toScoreModelFile, type ScoreModel } from "../../actors/analyzer/score-model.ts";
import { createWinkTagger } from "../../actors/analyzer/tagger.ts";
import { FEATURE_NAMES, REFERENCE_WEIGHTS } from "../../actors/profile/reference.ts";
import { ANALYZER_PATHS, loadAnalyzerLexicons, loadPromptAnalyzer, writeJsonFile, writeTextFile } from "../lib/analyzer-files.ts";
import { DEFAULT_PROFILES_DIR, loadProfiles } from "../lib/profiles.ts";

/** What "hard" means: the heavy model's gain over the light one is large, or the light model fails. */
export type CalibrationLabel = "gap" | "light-fails";

/** With `light-fails`: the share of training prompts whose light score counts as a failure. */
export const LIGHT_FAILS_SHARE = 0.2;

/** Share of prompts routed to the heavy model for the served-quality proxy. */
export const PROXY_SHARE = 0.1;

/** Calibration results for one (light, heavy) pair, on the held-out prompts. */
export interface PairCalibration {
  lightId: number;
  heavyId: number;
  lightModel: string;
  heavyModel: string;
  /** Median heavy − light score gain over the training prompts: the hard/easy cut. */
  hardCut: number;
  trainPrompts: number;
  testPrompts: number;
  /** ROC AUC of predicting "hard" on the test prompts. */
  auc: { referenceWeights: number; referenceWeightsOnReferenceFeatures: number; learnedWeights: number; random: number };
  /** Mean served discriminator score on the test prompts with PROXY_SHARE routed to heavy. */
  servedScoreAt10: { referenceWeights: number; learnedWeights: number; random: number; oracle: number; lightOnly: number };
  learned: { weights: number[]; intercept: number; iterations: number; converged: boolean };
}

/** What `calibrateCommand` returns (and prints). */
export interface CalibrationReport {
  seed: number;
  trainFraction: number;
  pairs: PairCalibration[];
  /** Where the learned weights of the first pair were written. */
  weightsPath: string;
}

/** Parses "2:3", "2,3" or "2-3" into reference model ids. */
export function parsePair(text: string): [number, number] {
  const m = /^\s*(\d+)\s*(?::|,|->|-|>)\s*(\d+)\s*$/.exec(text);
  if (!m || m[1] === m[2]) throw new Error(`--pair must be "light:heavy" reference ids (0..3), got "${text}"`);
  return [Number(m[1]), Number(m[2])];
}

function calibratePair(
  lightId: number,
  heavyId: number,
  ourFeatures: Float64Array[],
  referenceFeatures: Float64Array[],
  seed: number,
  trainFraction: number,
  referenceModel: ScoreModel,
  label: CalibrationLabel,
): { report: PairCalibration; model: ScoreModel } {
  const profiles = loadProfiles();
  const lightModel = profiles.nameByReferenceId.get(lightId);
  const heavyModel = profiles.nameByReferenceId.get(heavyId);
  const light = lightModel ? profiles.reference.scores.get(lightModel) : undefined;
  const heavy = heavyModel ? profiles.reference.scores.get(heavyModel) : undefined;
  if (!light || !heavy || !lightModel || !heavyModel) throw new Error(`no discriminator scores for pair ${lightId}:${heavyId}`);
  const { train, test } = splitRows(ourFeatures.length, trainFraction, seed);
  let hardCut: number;
  let labels: Uint8Array;
  if (label === "light-fails") {
    const trainLight = train.map((i) => light[i]).sort((a, b) => a - b);
    hardCut = trainLight[Math.floor(LIGHT_FAILS_SHARE * trainLight.length)];
    labels = lightFailsLabels(light, hardCut);
  } else {
    hardCut = median(train.map((i) => heavy[i] - light[i]));
    labels = hardLabels(light, heavy, hardCut);
  }

  // Normalise with the analyzer's own feature distribution: these are the features it sees online.
  const norm = fitNormalisation(ourFeatures, new Float64Array(FEATURE_NAMES.length), "");
  const z = (v: Float64Array) => v.map((x, k) => (norm.stds[k] > 0 ? (x - norm.means[k]) / norm.stds[k] : 0));
  const fit = fitLogistic(train.map((i) => z(ourFeatures[i])), train.map((i) => labels[i]), { l2: 1e-3 });
  const model: ScoreModel = { means: norm.means, stds: norm.stds, weights: fit.weights, intercept: fit.intercept, source: "" };

  const pick = (arr: ArrayLike<number>) => test.map((i) => arr[i]);
  const testLabels = pick(labels);
  const refScores = test.map((i) => scoreVector(ourFeatures[i], referenceModel));
  const refOnRef = test.map((i) => scoreVector(referenceFeatures[i], referenceModel));
  const learnedScores = test.map((i) => scoreVector(ourFeatures[i], model));
  const rand = mulberry32(seed ^ 0x9e3779b9);
  const randomScores = test.map(() => rand());
  const lightT = pick(light);
  const heavyT = pick(heavy);
  const gain = test.map((i) => heavy[i] - light[i]);
  // Random routing's expected served score: every prompt goes heavy with probability PROXY_SHARE.
  const mean = (a: number[]) => a.reduce((s, x) => s + x, 0) / a.length;
  const report: PairCalibration = {
    lightId,
    heavyId,
    lightModel,
    heavyModel,
    hardCut,
    trainPrompts: train.length,
    testPrompts: test.length,
    auc: {
      referenceWeights: rocAuc(refScores, testLabels),
      referenceWeightsOnReferenceFeatures: rocAuc(refOnRef, testLabels),
      learnedWeights: rocAuc(learnedScores, testLabels),
      random: rocAuc(randomScores, testLabels),
    },
    servedScoreAt10: {
      referenceWeights: servedQuality(refScores, lightT, heavyT, PROXY_SHARE),
      learnedWeights: servedQuality(learnedScores, lightT, heavyT, PROXY_SHARE),
      random: (1 - PROXY_SHARE) * mean(lightT) + PROXY_SHARE * mean(heavyT),
      oracle: servedQuality(gain, lightT, heavyT, PROXY_SHARE),
      lightOnly: mean(lightT),
    },
    learned: { weights: [...fit.weights], intercept: fit.intercept, iterations: fit.iterations, converged: fit.converged },
  };
  return { report, model };
}

/**
 * Learns weights for `pair` (default "2:3", sd3.5-medium → sd3.5-large) and also reports 1:2;
 * writes the first pair's model to `out` (default profiles/analyzer/router-weights-learned.json).
 */
export async function calibrateCommand(args: { pair?: string; out?: string; seed?: number; label?: CalibrationLabel }): Promise<CalibrationReport> {
  const seed = args.seed ?? 20260405;
  const label: CalibrationLabel = args.label ?? "gap";
  const trainFraction = 0.7;
  const [lightId, heavyId] = parsePair(args.pair ?? "2:3");
  const pairs: [number, number][] = [[lightId, heavyId]];
  if (!(lightId === 1 && heavyId === 2)) pairs.push([1, 2]);
  const profiles = loadProfiles();
  const analyzer = loadPromptAnalyzer();
  const ourFeatures = profiles.reference.prompts.map((p) => featureVector(analyzer.analyzePrompt(p).features));
  const reports: PairCalibration[] = [];
  let firstModel: ScoreModel | undefined;
  for (const [l, h] of pairs) {
    const { report, model } = calibratePair(l, h, ourFeatures, profiles.reference.features, seed, trainFraction, analyzer.scoreModel, label);
    reports.push(report);
    firstModel ??= model;
  }
  const first = reports[0];
  const out = args.out ?? join(DEFAULT_PROFILES_DIR, ANALYZER_PATHS.learnedWeights);
  firstModel!.source =
    `hadis calibrate --pair ${first.lightId}:${first.heavyId} --seed ${seed}: L2 logistic regression (Newton) on ${first.trainPrompts} of the 5,000 reference prompts; ` +
    (label === "light-fails"
      ? `label hard = ${first.lightModel} discriminator score < ${first.hardCut.toExponential(3)} (the train prompts' ${LIGHT_FAILS_SHARE} quantile: the light model fails); `
      : `label hard = ${first.heavyModel} − ${first.lightModel} discriminator score > ${first.hardCut.toFixed(4)} (train median); `) +
    `means/stds are the analyzer's own features over the 5,000 prompts; score = log-odds of hard.`;
  writeJsonFile(out, toScoreModelFile(firstModel!, { heldOut: { prompts: first.testPrompts, auc: first.auc, servedScoreAt10: first.servedScoreAt10 } }));
  const report: CalibrationReport = { seed, trainFraction, pairs: reports, weightsPath: out };
  printReport(report);
  return report;
}

function printReport(r: CalibrationReport): void {
  const f = (x: number) => x.toFixed(4);
  for (const p of r.pairs) {
    console.log(`pair ${p.lightId}:${p.heavyId} (${p.lightModel} → ${p.heavyModel}), hard cut ${p.hardCut.toExponential(2)}, train ${p.trainPrompts} / test ${p.testPrompts}`);
    console.log(`  ROC AUC  reference weights ${f(p.auc.referenceWeights)} (on reference features ${f(p.auc.referenceWeightsOnReferenceFeatures)})  learned ${f(p.auc.learnedWeights)}  random ${f(p.auc.random)}`);
    const s = p.servedScoreAt10;
    console.log(`  mean served score @10% heavy  reference ${f(s.referenceWeights)}  learned ${f(s.learnedWeights)}  random ${f(s.random)}  oracle ${f(s.oracle)}  light only ${f(s.lightOnly)}`);
    console.log(`  learned weights [${p.learned.weights.map((w) => w.toFixed(3)).join(", ")}] intercept ${p.learned.intercept.toFixed(3)}`);
  }
  console.log(`wrote ${r.weightsPath}`);
}

/** Agreement of the token-rarity feature with the reference on `rows`, given a common-word set. */
function rarityAgreement(words: string[][], reference: number[], rows: number[], common: ReadonlySet<string>): { exact: number; pearson: number } {
  const ours = rows.map((i) => words[i].filter((w) => isRare(w, common)).length);
  const theirs = rows.map((i) => reference[i]);
  return { exact: exactMatchRate(ours, theirs), pearson: pearson(ours, theirs) };
}

/**
 * Regenerates the analyzer's derived data: `router-weights.json` (reference weights, means/stds
 * of the reference features) and `rarity-overrides.tsv` (fitted on all 5,000 prompts; the
 * held-out agreement of a fit on half of them is printed as the honest estimate).
 */
export async function deriveAnalyzerDataCommand(args: { profilesDir?: string } = {}): Promise<void> {
  const dir = args.profilesDir ?? DEFAULT_PROFILES_DIR;
  const profiles = loadProfiles(dir);
  const reference = fitNormalisation(profiles.reference.features, REFERENCE_WEIGHTS, "");
  reference.source =
    "HADIS artifact router: weights [0.85,0.32,0.72,0.99,0.76,0.07,0.78,0.01]; means/stds (population) of profiles/reference/prompts/prompt_features.csv over its 5,000 prompts";
  writeJsonFile(join(dir, ANALYZER_PATHS.referenceWeights), toScoreModelFile(reference));

  const base = loadAnalyzerLexicons(dir, false);
  const tagger = createWinkTagger();
  const words = profiles.reference.prompts.map((p) => {
    const t = retag(tagger.tag(p.toLowerCase()), base.dominantPos);
    return t.words.filter((_, j) => !t.isPunct[j]).map(rarityKey);
  });
  const refCounts = profiles.reference.features.map((f) => f[1]);
  const all = words.map((_, i) => i);
  const even = all.filter((i) => i % 2 === 0);
  const odd = all.filter((i) => i % 2 === 1);
  const isRareBase = (w: string) => isRare(w, base.commonWords);
  const half = fitRarityOverrides({ words, referenceCounts: refCounts, rows: even, isRareBase });
  const withHalf = new Set(base.commonWords);
  for (const [w, rare] of half) rare ? withHalf.delete(w) : withHalf.add(w);
  console.log(`token rarity on odd prompts, SUBTLEX only: ${JSON.stringify(rarityAgreement(words, refCounts, odd, base.commonWords))}`);
  console.log(`token rarity on odd prompts, overrides fitted on even prompts (${half.size}): ${JSON.stringify(rarityAgreement(words, refCounts, odd, withHalf))}`);
  const overrides = fitRarityOverrides({ words, referenceCounts: refCounts, rows: all, isRareBase });
  const header =
    "Per-word rarity corrections (word<TAB>rare|common) applied on top of SUBTLEX-US counts >= 350.\n" +
    "Fitted by `deriveAnalyzerDataCommand` (services/cli/calibrate.ts) to the token_rarity column of\n" +
    "profiles/reference/prompts/prompt_features.csv (the HADIS artifact, computed with wordfreq < 1e-5).";
  writeTextFile(join(dir, ANALYZER_PATHS.rarityOverrides), formatRarityOverrides(overrides, header));
  console.log(`wrote ${ANALYZER_PATHS.referenceWeights} and ${ANALYZER_PATHS.rarityOverrides} (${overrides.size} overrides)`);
}
