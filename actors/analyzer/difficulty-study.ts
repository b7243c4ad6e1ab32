/**
 * Held-out evaluation of difficulty scorers for one (light, heavy) pair: ROC AUC of the "hard"
 * label and the quality the cascade serves when each scorer picks the prompts routed straight to
 * the heavy model, at the router shares (and discriminator quantiles) of the lookup tables.
 */
import { cascadeServed, logitGapT, mulberry32, rocAuc } from "./calibration.ts";
import { hardLabelsFrom, splitByPrompt } from "./difficulty-training.ts";
import type { ParetoRow } from "../profile/reference.ts";

/** One operating point: the top `share` by score go to heavy; light images below the `conf` quantile are escalated. */
export interface TablePoint {
  share: number;
  conf: number;
}

/** Router shares tried for a pair no table lists (router only). */
export const DEFAULT_POINTS: readonly TablePoint[] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9].map((share) => ({ share, conf: 0 }));

/**
 * The distinct operating points the tables give a pair, excluding shares 0 and 1 (where every
 * router serves the same); DEFAULT_POINTS when no table lists the pair.
 */
export function tablePoints(rows: readonly ParetoRow[], lightId: number, heavyId: number): TablePoint[] {
  const seen = new Map<string, TablePoint>();
  for (const r of rows) {
    if (r.lightId !== lightId || r.heavyId !== heavyId || r.routerThreshold <= 0 || r.routerThreshold >= 1) continue;
    seen.set(`${r.routerThreshold}:${r.discThreshold}`, { share: r.routerThreshold, conf: r.discThreshold });
  }
  const points = [...seen.values()].sort((a, b) => a.share - b.share || a.conf - b.conf);
  return points.length > 0 ? points : [...DEFAULT_POINTS];
}

/** A pair's per-prompt quality data. */
export interface PairQuality {
  /** Mean P(real) of each prompt's images on the light and the heavy model. */
  light: Float64Array;
  heavy: Float64Array;
  /** Welch's t of heavy − light image log-odds per prompt (the training target; "hard" = above its training median). */
  gapT: Float64Array;
  /** Light P(real) sorted ascending (the discriminator's quantile thresholds come from all prompts, as the judge's). */
  lightSorted: Float64Array;
}

/** Per-prompt quality of a pair from the images' P(real) (`imagesPerPrompt` rows a prompt). */
export function pairQuality(lightImages: Float64Array, heavyImages: Float64Array, imagesPerPrompt = 4): PairQuality {
  const n = lightImages.length / imagesPerPrompt;
  const mean = (a: Float64Array) =>
    Float64Array.from({ length: n }, (_, i) => {
      let s = 0;
      for (let j = 0; j < imagesPerPrompt; j++) s += a[imagesPerPrompt * i + j];
      return s / imagesPerPrompt;
    });
  const light = mean(lightImages);
  return {
    light,
    heavy: mean(heavyImages),
    gapT: logitGapT(lightImages, heavyImages, imagesPerPrompt),
    lightSorted: Float64Array.from(light).sort(),
  };
}

/** The discriminator threshold at quantile `conf` of the light model's scores (−∞: none escalated). */
export function lightThresholdAt(q: PairQuality, conf: number): number {
  if (conf <= 0) return Number.NEGATIVE_INFINITY;
  const s = q.lightSorted;
  return s[Math.min(s.length - 1, Math.floor(conf * s.length))];
}

/** What one scorer achieves on one held-out split. */
export interface HeldOutResult {
  auc: number;
  /** Mean served P(real) at each point, in `points` order. */
  served: number[];
}

/**
 * Evaluates scores of the `test` rows (`scores[j]` is row `test[j]`; null = random routing, in
 * expectation) against `labels`, and the cascade's mean served P(real) at each point.
 */
export function evaluateHeldOut(
  scores: ArrayLike<number> | null,
  test: readonly number[],
  labels: ArrayLike<number>,
  q: PairQuality,
  points: readonly TablePoint[],
  randomScores?: ArrayLike<number>,
): HeldOutResult {
  const pick = (a: ArrayLike<number>) => test.map((i) => a[i]);
  const light = pick(q.light);
  const heavy = pick(q.heavy);
  const testLabels = pick(labels);
  const auc = scores ? rocAuc(scores, testLabels) : randomScores ? rocAuc(randomScores, testLabels) : Number.NaN;
  const served = points.map((p) => cascadeServed(scores, light, light, heavy, p.share, lightThresholdAt(q, p.conf)).meanServed);
  return { auc, served };
}

/** Mean, sample sd and standard error (sd/√n) of values. */
export function meanSd(values: readonly number[]): { mean: number; sd: number; se: number } {
  const n = values.length;
  const mean = values.reduce((s, v) => s + v, 0) / n;
  const sd = n > 1 ? Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / (n - 1)) : Number.NaN;
  return { mean, sd, se: sd / Math.sqrt(n) };
}

/**
 * Fits a scorer on the training rows (their "hard" labels given) and returns each row's score,
 * or null for random routing.
 */
export type ScorerFactory = (train: readonly number[], labels: Uint8Array, seed: number) => ((row: number) => number) | null;

/** Inputs of `studyPair`. */
export interface StudyInput {
  prompts: readonly string[];
  quality: PairQuality;
  points: readonly TablePoint[];
  seeds: readonly number[];
  /** Share of prompts (by text) learned on; the rest are held out. */
  trainFraction: number;
  scorers: Readonly<Record<string, ScorerFactory>>;
}

/** Per scorer, per seed: held-out AUC and served P(real) at each point. */
export interface PairStudy {
  points: TablePoint[];
  seeds: number[];
  byScorer: Record<string, { auc: number[]; served: number[][] }>;
}

/** Runs every scorer over `seeds` held-out splits by prompt (labels cut at each split's training median). */
export function studyPair(input: StudyInput): PairStudy {
  const byScorer: PairStudy["byScorer"] = {};
  for (const name of Object.keys(input.scorers)) byScorer[name] = { auc: [], served: [] };
  for (const seed of input.seeds) {
    const { train, test } = splitByPrompt(input.prompts, input.trainFraction, seed);
    const labels = hardLabelsFrom(input.quality.gapT, train);
    for (const [name, factory] of Object.entries(input.scorers)) {
      const scoreOf = factory(train, labels, seed);
      const rand = mulberry32(seed * 7919 + 17);
      const result = scoreOf
        ? evaluateHeldOut(test.map(scoreOf), test, labels, input.quality, input.points)
        : evaluateHeldOut(
            null,
            test,
            labels,
            input.quality,
            input.points,
            test.map(() => rand()),
          );
      byScorer[name].auc.push(result.auc);
      byScorer[name].served.push(result.served);
    }
  }
  return { points: [...input.points], seeds: [...input.seeds], byScorer };
}

/** A scorer's study in figures: AUC, served P(real) per point, and its gain over a baseline scorer. */
export interface ScorerSummary {
  auc: { mean: number; sd: number; se: number };
  /** Mean served P(real) per point (mean, sd over seeds). */
  served: { share: number; conf: number; mean: number; sd: number }[];
  /** This scorer − the baseline per point (mean, sd, se over seeds). */
  gainPerPoint: { share: number; conf: number; mean: number; sd: number; se: number }[];
  /** The gain averaged over the points, per seed, then summarised over seeds. */
  gain: { mean: number; sd: number; se: number };
}

/** Summarises a study against `baseline` (default `reference`). */
export function summariseStudy(study: PairStudy, baseline = "reference"): Record<string, ScorerSummary> {
  const base = study.byScorer[baseline];
  const out: Record<string, ScorerSummary> = {};
  for (const [name, s] of Object.entries(study.byScorer)) {
    const diffs = s.served.map((row, k) => row.map((v, p) => v - (base ? base.served[k][p] : Number.NaN)));
    out[name] = {
      auc: meanSd(s.auc),
      served: study.points.map((pt, p) => ({ ...pt, ...pick(meanSd(s.served.map((row) => row[p]))) })),
      gainPerPoint: study.points.map((pt, p) => ({ ...pt, ...meanSd(diffs.map((row) => row[p])) })),
      gain: meanSd(diffs.map((row) => row.reduce((a, v) => a + v, 0) / row.length)),
    };
  }
  return out;
}

const pick = ({ mean, sd }: { mean: number; sd: number }) => ({ mean, sd });

/**
 * Whether a scorer raised served quality over the baseline: its gain averaged over the points is
 * positive by more than `zCut` standard errors over the seeds.
 */
export function raisesServedQuality(summary: ScorerSummary, zCut = 2): boolean {
  return summary.gain.mean > 0 && summary.gain.mean > zCut * summary.gain.se;
}
