/**
 * `hadis calibrate`: learns router weights from measured quality. By default (`--label
 * logit-gap`) a prompt is hard for a (light, heavy) pair when the light model's discriminator
 * score is low relative to the heavy model's: Welch's t of the two models' image log-odds above
 * the training prompts' median. Logistic regression on the analyzer's z-normalised features
 * (L2 penalty chosen by inner cross-validation) predicts it; repeated k-fold cross-validation
 * compares, on held-out prompts, the ROC AUC of the reference weights, the learned weights and
 * random routing, and the quality the hybrid cascade serves with each. The weights written are
 * the same procedure fitted on all prompts. Also `deriveAnalyzerDataCommand`, which regenerates
 * the analyzer's derived data files.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { exactMatchRate, pearson } from "../../../actors/analyzer/agreement.ts";
import {
  aboveLabels,
  cascadeServed,
  correctedSe,
  fitLogistic,
  kFolds,
  logitGapT,
  logOdds,
  mulberry32,
  rocAuc,
  selectL2,
  summarise,
} from "../../../actors/analyzer/calibration.ts";
import { isRare, rarityKey } from "../../../actors/analyzer/features.ts";
import { formatRarityOverrides } from "../../../actors/analyzer/lexicons.ts";
import { fitRarityOverrides } from "../../../actors/analyzer/rarity-fit.ts";
import { retag } from "../../../actors/analyzer/retag.ts";
import { featureVector, fitNormalisation, scoreVector, toScoreModelFile, type ScoreModel } from "../../../actors/analyzer/score-model.ts";
import { createWinkTagger } from "../../../actors/analyzer/tagger.ts";
import { FEATURE_NAMES, REFERENCE_WEIGHTS, parseDiscriminatorImageScores } from "../../../actors/profile/reference.ts";
import { ANALYZER_PATHS, loadAnalyzerLexicons, loadPromptAnalyzer, writeJsonFile, writeTextFile } from "../../files/analyzer-files.ts";
import { DEFAULT_PROFILES_DIR, loadProfiles } from "../../files/profiles.ts";
import { ConfigurationError } from "../../../contracts/errors.ts";

/**
 * What "hard" means. `logit-gap`: the light model's image log-odds fall below the heavy
 * model's by more than the training median, in standard errors (Welch's t over the 4 images).
 * `gap`: the raw mean-P(real) gain heavy − light is above the training median. `light-fails`:
 * the light model's score is in the training prompts' lowest LIGHT_FAILS_SHARE.
 */
export type CalibrationLabel = "logit-gap" | "gap" | "light-fails";
export const CALIBRATION_LABELS: readonly CalibrationLabel[] = ["logit-gap", "gap", "light-fails"];

/** With `light-fails`: the share of training prompts whose light score counts as a failure. */
export const LIGHT_FAILS_SHARE = 0.2;

/** L2 penalties tried by the inner cross-validation. */
export const L2_GRID = [1e-4, 1e-3, 1e-2, 1e-1, 1];

/** Cascade settings evaluated: router share r (top r by score straight to heavy), conf_thres c. */
export const CASCADE_POINTS: readonly { share: number; conf: number }[] = [
  { share: 0.1, conf: 0 },
  { share: 0.2, conf: 0 },
  { share: 0.2, conf: 0.1 },
  { share: 0.3, conf: 0.2 },
];

/** Mean ± sd over the held-out folds, naive standard error sd/√J and the overlap-corrected one. */
export interface FoldSummary {
  mean: number;
  sd: number;
  se: number;
  correctedSe: number;
}

/** Served quality of one cascade setting, averaged over held-out folds. */
export interface CascadeSummary {
  share: number;
  conf: number;
  /** Mean served P(real) (the FID proxy) per router, and learned − reference per fold. */
  pReal: { reference: FoldSummary; learned: FoldSummary; random: FoldSummary; learnedMinusReference: FoldSummary };
  /** Mean served image log-odds (less dominated by the few large P(real)). */
  logOdds: { reference: FoldSummary; learned: FoldSummary; random: FoldSummary; learnedMinusReference: FoldSummary };
  /** Share of prompts whose light pass is wasted (escalated after running light). */
  wastedLight: { reference: FoldSummary; learned: FoldSummary; random: FoldSummary };
  heavyShare: FoldSummary;
}

/** Cross-validated calibration of one (light, heavy) pair. */
export interface PairCalibration {
  lightId: number;
  heavyId: number;
  lightModel: string;
  heavyModel: string;
  label: CalibrationLabel;
  /** Held-out ROC AUC of predicting "hard", over folds × repeats. */
  auc: {
    referenceWeights: FoldSummary;
    referenceWeightsOnReferenceFeatures: FoldSummary;
    learnedWeights: FoldSummary;
    random: FoldSummary;
    learnedMinusReference: FoldSummary;
  };
  cascade: CascadeSummary[];
  /** L2 penalties the inner cross-validation chose, one per outer fold. */
  chosenL2: number[];
  /** The weights fitted on all prompts (the hard/easy cut = median over all prompts). */
  learned: { weights: number[]; intercept: number; l2: number; hardCut: number; iterations: number; converged: boolean };
}

/** What `calibrateCommand` returns (and prints). */
export interface CalibrationReport {
  seed: number;
  folds: number;
  repeats: number;
  label: CalibrationLabel;
  pairs: PairCalibration[];
  /** Where the learned weights of the first pair were written. */
  weightsPath: string;
}

/** Parses "2:3", "2,3" or "2-3" into reference model ids. */
export function parsePair(text: string): [number, number] {
  const m = /^\s*(\d+)\s*(?::|,|->|-|>)\s*(\d+)\s*$/.exec(text);
  if (!m || m[1] === m[2]) throw new ConfigurationError(`--pair must be "light:heavy" reference ids (0..3), got "${text}"`);
  return [Number(m[1]), Number(m[2])];
}

function foldSummary(values: number[], k: number): FoldSummary {
  const s = summarise(values);
  return { mean: s.mean, sd: s.sd, se: s.se, correctedSe: correctedSe(values, k) };
}

/** Linear-time quantile by sorting: the value at floor(q·n) of the sorted values. */
function quantile(values: ArrayLike<number>, q: number): number {
  const s = Float64Array.from(values).sort();
  return s[Math.min(s.length - 1, Math.max(0, Math.floor(q * s.length)))];
}

/** Per-prompt statistic whose large values mean "hard", and the share of training prompts above the cut. */
function hardnessStatistic(
  label: CalibrationLabel,
  light: Float64Array,
  heavy: Float64Array,
  lightImages: Float64Array,
  heavyImages: Float64Array,
): { stat: Float64Array; hardShare: number } {
  if (label === "logit-gap") return { stat: logitGapT(lightImages, heavyImages, lightImages.length / light.length), hardShare: 0.5 };
  if (label === "gap") return { stat: heavy.map((h, i) => h - light[i]), hardShare: 0.5 };
  return { stat: light.map((l) => -l), hardShare: LIGHT_FAILS_SHARE };
}

/** Labels from the statistic, cut at the training rows' (1 − hardShare) quantile. */
function labelsFromTrain(stat: Float64Array, hardShare: number, train: readonly number[]): { labels: Uint8Array; cut: number } {
  const cut = quantile(
    train.map((i) => stat[i]),
    1 - hardShare,
  );
  return { labels: aboveLabels(stat, cut), cut };
}

function calibratePair(
  lightId: number,
  heavyId: number,
  z: Float64Array[],
  ourFeatures: Float64Array[],
  referenceFeatures: Float64Array[],
  referenceModel: ScoreModel,
  label: CalibrationLabel,
  seed: number,
  folds: number,
  repeats: number,
): { report: PairCalibration; fit: ReturnType<typeof fitLogistic> } {
  const profiles = loadProfiles();
  const lightModel = profiles.nameByReferenceId.get(lightId);
  const heavyModel = profiles.nameByReferenceId.get(heavyId);
  const light = lightModel ? profiles.reference.scores.get(lightModel) : undefined;
  const heavy = heavyModel ? profiles.reference.scores.get(heavyModel) : undefined;
  if (!light || !heavy || !lightModel || !heavyModel)
    throw new ConfigurationError(`no discriminator scores for pair ${lightId}:${heavyId}`);
  const images = (id: number) =>
    parseDiscriminatorImageScores(readFileSync(join(DEFAULT_PROFILES_DIR, "reference", "discriminator", `scores_model_${id}.txt`), "utf8"));
  const lightImages = images(lightId);
  const heavyImages = images(heavyId);
  const perPrompt = lightImages.length / light.length;
  const meanLogOdds = (imgs: Float64Array) =>
    Float64Array.from(light, (_, i) => {
      let s = 0;
      for (let j = 0; j < perPrompt; j++) s += logOdds(imgs[perPrompt * i + j]);
      return s / perPrompt;
    });
  const lightLogOdds = meanLogOdds(lightImages);
  const heavyLogOdds = meanLogOdds(heavyImages);
  const { stat, hardShare } = hardnessStatistic(label, light, heavy, lightImages, heavyImages);
  const n = z.length;
  const refScoresAll = ourFeatures.map((f) => scoreVector(f, referenceModel));
  const refOnRefAll = referenceFeatures.map((f) => scoreVector(f, referenceModel));
  // The discriminator's threshold: the conf_thres quantile of all the light model's prompt scores.
  const lightThreshold = (conf: number) => (conf > 0 ? quantile(light, conf) : -Infinity);

  const auc = { ref: [] as number[], refOnRef: [] as number[], learned: [] as number[], random: [] as number[], diff: [] as number[] };
  const served = CASCADE_POINTS.map(() => ({
    pRef: [] as number[],
    pLearned: [] as number[],
    pRandom: [] as number[],
    pDiff: [] as number[],
    lRef: [] as number[],
    lLearned: [] as number[],
    lRandom: [] as number[],
    lDiff: [] as number[],
    wRef: [] as number[],
    wLearned: [] as number[],
    wRandom: [] as number[],
    heavy: [] as number[],
  }));
  const chosenL2: number[] = [];
  for (let rep = 0; rep < repeats; rep++) {
    const parts = kFolds(n, folds, seed + rep);
    for (let f = 0; f < folds; f++) {
      const test = parts[f];
      const train = parts.filter((_, g) => g !== f).flat();
      const { labels } = labelsFromTrain(stat, hardShare, train);
      const { l2 } = selectL2(z, labels, train, L2_GRID, 5, seed + 1000 * rep + f);
      chosenL2.push(l2);
      const fit = fitLogistic(
        train.map((i) => z[i]),
        train.map((i) => labels[i]),
        { l2 },
      );
      const pick = (a: ArrayLike<number>) => test.map((i) => a[i]);
      const testLabels = pick(labels);
      const learned = test.map((i) => fit.intercept + fit.weights.reduce((s, w, k) => s + w * z[i][k], 0));
      const ref = pick(refScoresAll);
      const rand = mulberry32((seed + 7919 * rep + f) ^ 0x9e3779b9);
      auc.ref.push(rocAuc(ref, testLabels));
      auc.refOnRef.push(rocAuc(pick(refOnRefAll), testLabels));
      auc.learned.push(rocAuc(learned, testLabels));
      auc.random.push(
        rocAuc(
          test.map(() => rand()),
          testLabels,
        ),
      );
      auc.diff.push(auc.learned.at(-1)! - auc.ref.at(-1)!);
      const lightT = pick(light);
      CASCADE_POINTS.forEach(({ share, conf }, c) => {
        const thr = lightThreshold(conf);
        const run = (router: number[] | null, lq: number[], hq: number[]) => cascadeServed(router, lightT, lq, hq, share, thr);
        const [pR, pL, pX] = [ref, learned, null].map((r) => run(r, lightT, pick(heavy)));
        const [lR, lL, lX] = [ref, learned, null].map((r) => run(r, pick(lightLogOdds), pick(heavyLogOdds)));
        const s = served[c];
        s.pRef.push(pR.meanServed);
        s.pLearned.push(pL.meanServed);
        s.pRandom.push(pX.meanServed);
        s.pDiff.push(pL.meanServed - pR.meanServed);
        s.lRef.push(lR.meanServed);
        s.lLearned.push(lL.meanServed);
        s.lRandom.push(lX.meanServed);
        s.lDiff.push(lL.meanServed - lR.meanServed);
        s.wRef.push(pR.wastedLight);
        s.wLearned.push(pL.wastedLight);
        s.wRandom.push(pX.wastedLight);
        s.heavy.push(pL.heavyShare);
      });
    }
  }
  const fs = (v: number[]) => foldSummary(v, folds);
  // The shipped weights: the same procedure on all prompts.
  const all = Array.from({ length: n }, (_, i) => i);
  const { labels, cut } = labelsFromTrain(stat, hardShare, all);
  const { l2 } = selectL2(z, labels, all, L2_GRID, 5, seed);
  const fit = fitLogistic(z, labels, { l2 });
  const report: PairCalibration = {
    lightId,
    heavyId,
    lightModel,
    heavyModel,
    label,
    auc: {
      referenceWeights: fs(auc.ref),
      referenceWeightsOnReferenceFeatures: fs(auc.refOnRef),
      learnedWeights: fs(auc.learned),
      random: fs(auc.random),
      learnedMinusReference: fs(auc.diff),
    },
    cascade: CASCADE_POINTS.map(({ share, conf }, c) => {
      const s = served[c];
      return {
        share,
        conf,
        pReal: { reference: fs(s.pRef), learned: fs(s.pLearned), random: fs(s.pRandom), learnedMinusReference: fs(s.pDiff) },
        logOdds: { reference: fs(s.lRef), learned: fs(s.lLearned), random: fs(s.lRandom), learnedMinusReference: fs(s.lDiff) },
        wastedLight: { reference: fs(s.wRef), learned: fs(s.wLearned), random: fs(s.wRandom) },
        heavyShare: fs(s.heavy),
      };
    }),
    chosenL2,
    learned: {
      weights: [...fit.weights],
      intercept: fit.intercept,
      l2,
      hardCut: cut,
      iterations: fit.iterations,
      converged: fit.converged,
    },
  };
  return { report, fit };
}

function labelDescription(label: CalibrationLabel, p: PairCalibration): string {
  if (label === "logit-gap")
    return `label hard = Welch t of ${p.heavyModel} − ${p.lightModel} image log-odds (4 images a prompt) > ${p.learned.hardCut.toFixed(4)} (median over the prompts)`;
  if (label === "gap")
    return `label hard = ${p.heavyModel} − ${p.lightModel} mean P(real) > ${p.learned.hardCut.toExponential(3)} (median over the prompts)`;
  return `label hard = ${p.lightModel} mean P(real) < ${(-p.learned.hardCut).toExponential(3)} (its ${LIGHT_FAILS_SHARE} quantile: the light model fails)`;
}

/**
 * Calibrates `pair` (default "2:3", sd3.5-medium → sd3.5-large) and also 1:2 with `repeats` ×
 * `folds`-fold cross-validation; writes the first pair's all-prompt fit to `out` (default
 * profiles/analyzer/router-weights-learned.json) with the held-out figures beside it.
 */
export async function calibrateCommand(args: {
  pair?: string;
  out?: string;
  seed?: number;
  label?: CalibrationLabel;
  folds?: number;
  repeats?: number;
}): Promise<CalibrationReport> {
  const seed = args.seed ?? 20260405;
  const label: CalibrationLabel = args.label ?? "logit-gap";
  if (!CALIBRATION_LABELS.includes(label)) throw new ConfigurationError(`--label must be one of ${CALIBRATION_LABELS.join(", ")}`);
  const folds = args.folds ?? 5;
  const repeats = args.repeats ?? 4;
  if (!(folds >= 2 && repeats >= 1)) throw new ConfigurationError("--folds must be ≥ 2 and --repeats ≥ 1");
  const [lightId, heavyId] = parsePair(args.pair ?? "2:3");
  const pairs: [number, number][] = [[lightId, heavyId]];
  if (!(lightId === 1 && heavyId === 2)) pairs.push([1, 2]);
  const profiles = loadProfiles();
  const analyzer = loadPromptAnalyzer();
  const ourFeatures = profiles.reference.prompts.map((p) => featureVector(analyzer.analyzePrompt(p).features));
  // Normalise with the analyzer's own feature distribution: these are the features it sees online.
  const norm = fitNormalisation(ourFeatures, new Float64Array(FEATURE_NAMES.length), "");
  const z = ourFeatures.map((v) => v.map((x, k) => (norm.stds[k] > 0 ? (x - norm.means[k]) / norm.stds[k] : 0)));
  const reports: PairCalibration[] = [];
  let firstFit: ReturnType<typeof fitLogistic> | undefined;
  for (const [l, h] of pairs) {
    const { report, fit } = calibratePair(
      l,
      h,
      z,
      ourFeatures,
      profiles.reference.features,
      analyzer.scoreModel,
      label,
      seed,
      folds,
      repeats,
    );
    reports.push(report);
    firstFit ??= fit;
  }
  const first = reports[0];
  const out = args.out ?? join(DEFAULT_PROFILES_DIR, ANALYZER_PATHS.learnedWeights);
  const model: ScoreModel = {
    means: norm.means,
    stds: norm.stds,
    weights: firstFit!.weights,
    intercept: firstFit!.intercept,
    source:
      `hadis calibrate --pair ${first.lightId}:${first.heavyId} --label ${label} --seed ${seed}: L2 logistic regression (Newton, l2 ${first.learned.l2} by 5-fold CV) on all 5,000 reference prompts; ` +
      `${labelDescription(label, first)}; means/stds are the analyzer's own features over the 5,000 prompts; score = log-odds of hard. ` +
      `heldOut: the same procedure under ${repeats} × ${folds}-fold cross-validation (mean, sd over folds; correctedSe = Nadeau–Bengio).`,
  };
  writeJsonFile(out, toScoreModelFile(model, { heldOut: { folds, repeats, seed, auc: first.auc, cascade: first.cascade } }));
  const report: CalibrationReport = { seed, folds, repeats, label, pairs: reports, weightsPath: out };
  printReport(report);
  return report;
}

function printReport(r: CalibrationReport): void {
  const f3 = (s: FoldSummary) => `${s.mean.toFixed(3)} ± ${s.sd.toFixed(3)}`;
  const d = (s: FoldSummary, digits: number) =>
    `${s.mean >= 0 ? "+" : ""}${s.mean.toFixed(digits)} ± ${s.sd.toFixed(digits)} (SE ${s.se.toFixed(digits)}, corrected SE ${s.correctedSe.toFixed(digits)})`;
  console.log(
    `label ${r.label}; ${r.repeats} × ${r.folds}-fold cross-validation, seed ${r.seed}: mean ± sd over ${r.repeats * r.folds} held-out folds`,
  );
  for (const p of r.pairs) {
    const a = p.auc;
    console.log(`pair ${p.lightId}:${p.heavyId} (${p.lightModel} → ${p.heavyModel})`);
    console.log(
      `  ROC AUC  reference weights ${f3(a.referenceWeights)} (on reference features ${f3(a.referenceWeightsOnReferenceFeatures)})  learned ${f3(a.learnedWeights)}  random ${f3(a.random)}`,
    );
    console.log(`  learned − reference AUC ${d(a.learnedMinusReference, 3)}`);
    for (const c of p.cascade) {
      const where =
        c.conf > 0
          ? `cascade r=${c.share} conf=${c.conf} (heavy ${(100 * c.heavyShare.mean).toFixed(1)}%)`
          : `router only, ${100 * c.share}% heavy`;
      console.log(
        `  ${where}: served P(real) ref ${c.pReal.reference.mean.toFixed(4)} learned ${c.pReal.learned.mean.toFixed(4)} random ${c.pReal.random.mean.toFixed(4)}; ` +
          `log-odds ref ${c.logOdds.reference.mean.toFixed(3)} learned ${c.logOdds.learned.mean.toFixed(3)} random ${c.logOdds.random.mean.toFixed(3)}` +
          (c.conf > 0
            ? `; wasted light passes ref ${(100 * c.wastedLight.reference.mean).toFixed(1)}% learned ${(100 * c.wastedLight.learned.mean).toFixed(1)}%`
            : ""),
      );
      console.log(`      learned − ref: P(real) ${d(c.pReal.learnedMinusReference, 4)}; log-odds ${d(c.logOdds.learnedMinusReference, 3)}`);
    }
    console.log(
      `  learned weights (all prompts, l2 ${p.learned.l2}) [${p.learned.weights.map((w) => w.toFixed(3)).join(", ")}] intercept ${p.learned.intercept.toFixed(3)}`,
    );
  }
  console.log(`wrote ${r.weightsPath}`);
}

/** Agreement of the token-rarity feature with the reference on `rows`, given a common-word set. */
function rarityAgreement(
  words: string[][],
  reference: number[],
  rows: number[],
  common: ReadonlySet<string>,
): { exact: number; pearson: number } {
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
  console.log(
    `token rarity on odd prompts, overrides fitted on even prompts (${half.size}): ${JSON.stringify(rarityAgreement(words, refCounts, odd, withHalf))}`,
  );
  const overrides = fitRarityOverrides({ words, referenceCounts: refCounts, rows: all, isRareBase });
  const header =
    "Per-word rarity corrections (word<TAB>rare|common) applied on top of SUBTLEX-US counts >= 350.\n" +
    "Fitted by `deriveAnalyzerDataCommand` (services/cli/research/calibrate.ts) to the token_rarity column of\n" +
    "profiles/reference/prompts/prompt_features.csv (the HADIS artifact, computed with wordfreq < 1e-5).";
  writeTextFile(join(dir, ANALYZER_PATHS.rarityOverrides), formatRarityOverrides(overrides, header));
  console.log(`wrote ${ANALYZER_PATHS.referenceWeights} and ${ANALYZER_PATHS.rarityOverrides} (${overrides.size} overrides)`);
}
