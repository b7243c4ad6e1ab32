/**
 * Learning router weights from measured quality: seeded train/test splits and k folds, "hard
 * prompt" labels from discriminator scores (the default: the light model's log-odds below the
 * heavy model's, in standard errors over the images of each prompt), L2-regularised logistic
 * regression (Newton's method) with the penalty chosen by cross-validation, ROC AUC, and the
 * served quality of routing a share of prompts to the heavy model, alone or in the hybrid
 * cascade (router, then discriminator escalation).
 */

import { mulberry32 } from "../profile/stats.ts";

export { mulberry32 };

/** Seeded shuffle of 0..n-1 cut into train (first `trainFraction`) and test rows. */
export function splitRows(n: number, trainFraction: number, seed: number): { train: number[]; test: number[] } {
  const rows = Array.from({ length: n }, (_, i) => i);
  const rand = mulberry32(seed);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [rows[i], rows[j]] = [rows[j], rows[i]];
  }
  const cut = Math.round(n * Math.min(Math.max(trainFraction, 0), 1));
  return { train: rows.slice(0, cut), test: rows.slice(cut) };
}

/**
 * Seeded k-fold partition of `rows` (default 0..n-1): shuffled, then row j of the shuffle goes
 * to fold j mod k. Folds are disjoint, cover every row, and differ in size by at most one.
 */
export function kFolds(rows: number | readonly number[], k: number, seed: number): number[][] {
  const all = typeof rows === "number" ? Array.from({ length: rows }, (_, i) => i) : rows;
  const order = splitRows(all.length, 1, seed).train.map((j) => all[j]);
  return Array.from({ length: k }, (_, f) => order.filter((_, j) => j % k === f));
}

/** Median of the given values (mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * A prompt is hard for a (light, heavy) pair when the heavy model's quality gain over the light
 * one, `heavy − light` discriminator score, is above `cut` (the calibrator uses the median gain
 * over the training rows): those are the prompts where skipping the light model pays most.
 */
export function hardLabels(light: ArrayLike<number>, heavy: ArrayLike<number>, cut: number): Uint8Array {
  const out = new Uint8Array(light.length);
  for (let i = 0; i < light.length; i++) out[i] = heavy[i] - light[i] > cut ? 1 : 0;
  return out;
}

/**
 * The other reading of "hard": the light model fails on the prompt — its discriminator score is
 * below `cut` (the calibrator uses a low quantile of the training rows' light scores), so the
 * discriminator would escalate it and the light pass is wasted. These are the prompts the router
 * should send straight to the heavy model.
 */
export function lightFailsLabels(light: ArrayLike<number>, cut: number): Uint8Array {
  const out = new Uint8Array(light.length);
  for (let i = 0; i < light.length; i++) out[i] = light[i] < cut ? 1 : 0;
  return out;
}

/** Log-odds of a probability, clamped to [eps, 1 − eps] so 0 and 1 stay finite. */
export function logOdds(p: number, eps = 1e-9): number {
  const q = Math.min(Math.max(p, eps), 1 - eps);
  return Math.log(q / (1 - q));
}

/**
 * Per prompt, how far the light model's discriminator score falls below the heavy model's, in
 * standard errors: Welch's t of the images' log-odds, (mean_h − mean_l) / √(s²_h/m + s²_l/m),
 * m = `imagesPerPrompt` (rows m·i … m·i+m−1 of each flat P(real) array are prompt i). Log-odds
 * spread the near-zero scores that dominate the data (median P(real) ≈ 0.002) and shrink the few
 * large ones; dividing by the standard error discounts prompts whose images disagree. `floor`
 * keeps four identical images finite.
 */
export function logitGapT(lightImages: ArrayLike<number>, heavyImages: ArrayLike<number>, imagesPerPrompt = 4, floor = 1e-9): Float64Array {
  const m = imagesPerPrompt;
  if (m < 2) throw new Error("logitGapT needs at least 2 images per prompt");
  if (lightImages.length !== heavyImages.length || lightImages.length % m !== 0)
    throw new Error(`image scores: ${lightImages.length} and ${heavyImages.length} rows, not equal multiples of ${m}`);
  const out = new Float64Array(lightImages.length / m);
  const meanVar = (a: ArrayLike<number>, i: number) => {
    let s = 0;
    for (let j = 0; j < m; j++) s += logOdds(a[m * i + j]);
    const mean = s / m;
    let ss = 0;
    for (let j = 0; j < m; j++) ss += (logOdds(a[m * i + j]) - mean) ** 2;
    return { mean, variance: ss / (m - 1) };
  };
  for (let i = 0; i < out.length; i++) {
    const l = meanVar(lightImages, i);
    const h = meanVar(heavyImages, i);
    out[i] = (h.mean - l.mean) / Math.sqrt((h.variance + l.variance) / m + floor);
  }
  return out;
}

/** 1 where `values[i] > cut`, else 0 (a hard-prompt label from any per-prompt statistic). */
export function aboveLabels(values: ArrayLike<number>, cut: number): Uint8Array {
  const out = new Uint8Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = values[i] > cut ? 1 : 0;
  return out;
}

/** A fitted logistic model: P(hard) = sigmoid(intercept + weights · x). */
export interface LogisticModel {
  weights: Float64Array;
  intercept: number;
  iterations: number;
  converged: boolean;
}

/** Solves A x = b (A square, row-major copy) by Gaussian elimination with partial pivoting. */
export function solveLinear(a: readonly Float64Array[], b: ArrayLike<number>): Float64Array {
  const n = b.length;
  const m = a.map((row, i) => {
    const r = new Float64Array(n + 1);
    r.set(row.subarray(0, n));
    r[n] = b[i];
    return r;
  });
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r][c]) > Math.abs(m[p][c])) p = r;
    if (Math.abs(m[p][c]) < 1e-12) throw new Error("singular system");
    [m[c], m[p]] = [m[p], m[c]];
    for (let r = c + 1; r < n; r++) {
      const f = m[r][c] / m[c][c];
      if (f !== 0) for (let k = c; k <= n; k++) m[r][k] -= f * m[c][k];
    }
  }
  const x = new Float64Array(n);
  for (let r = n - 1; r >= 0; r--) {
    let s = m[r][n];
    for (let k = r + 1; k < n; k++) s -= m[r][k] * x[k];
    x[r] = s / m[r][r];
  }
  return x;
}

const sigmoid = (z: number) => (z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z)));

/**
 * Fits logistic regression by Newton's method (IRLS) with an L2 penalty `l2` on the weights
 * (not the intercept), which also keeps separable data finite.
 */
export function fitLogistic(
  x: readonly ArrayLike<number>[],
  y: ArrayLike<number>,
  options: { l2?: number; maxIterations?: number; tolerance?: number } = {},
): LogisticModel {
  const l2 = options.l2 ?? 1e-3;
  const maxIterations = options.maxIterations ?? 50;
  const tolerance = options.tolerance ?? 1e-9;
  const n = x.length;
  if (n === 0) throw new Error("no training rows");
  const d = x[0].length;
  const beta = new Float64Array(d + 1); // [intercept, w...]
  let iterations = 0;
  let converged = false;
  const row = new Float64Array(d + 1);
  for (; iterations < maxIterations && !converged;) {
    iterations++;
    const grad = new Float64Array(d + 1);
    const hess = Array.from({ length: d + 1 }, () => new Float64Array(d + 1));
    for (let i = 0; i < n; i++) {
      row[0] = 1;
      for (let k = 0; k < d; k++) row[k + 1] = x[i][k];
      let z = 0;
      for (let k = 0; k <= d; k++) z += beta[k] * row[k];
      const p = sigmoid(z);
      const w = p * (1 - p);
      const r = y[i] - p;
      for (let a = 0; a <= d; a++) {
        grad[a] += r * row[a];
        const wa = w * row[a];
        for (let b = 0; b <= a; b++) hess[a][b] += wa * row[b];
      }
    }
    for (let a = 0; a <= d; a++) for (let b = 0; b < a; b++) hess[b][a] = hess[a][b];
    for (let k = 1; k <= d; k++) {
      grad[k] -= l2 * n * beta[k];
      // A tiny ridge keeps a constant (all-zero) feature column solvable; its weight stays 0.
      hess[k][k] += (l2 + 1e-10) * n;
    }
    const step = solveLinear(hess, grad);
    let size = 0;
    for (let k = 0; k <= d; k++) {
      beta[k] += step[k];
      size = Math.max(size, Math.abs(step[k]));
    }
    converged = size < tolerance;
  }
  return { weights: beta.slice(1), intercept: beta[0], iterations, converged };
}

/**
 * Picks the L2 penalty from `grid` with the best mean ROC AUC over a seeded `k`-fold
 * cross-validation of `rows` (the caller passes training rows only); ties go to the earlier entry.
 */
export function selectL2(
  x: readonly ArrayLike<number>[],
  y: ArrayLike<number>,
  rows: readonly number[],
  grid: readonly number[],
  k: number,
  seed: number,
): { l2: number; cvAuc: number } {
  const folds = kFolds(rows, k, seed);
  let best = { l2: grid[0], cvAuc: -Infinity };
  for (const l2 of grid) {
    let sum = 0;
    for (let f = 0; f < k; f++) {
      const train = folds.filter((_, g) => g !== f).flat();
      const m = fitLogistic(
        train.map((i) => x[i]),
        train.map((i) => y[i]),
        { l2 },
      );
      sum += rocAuc(
        folds[f].map((i) => linearScore(m, x[i])),
        folds[f].map((i) => y[i]),
      );
    }
    if (sum / k > best.cvAuc) best = { l2, cvAuc: sum / k };
  }
  return best;
}

/** intercept + weights · x. */
export function linearScore(model: Pick<LogisticModel, "weights" | "intercept">, x: ArrayLike<number>): number {
  let z = model.intercept;
  for (let k = 0; k < model.weights.length; k++) z += model.weights[k] * x[k];
  return z;
}

/** Area under the ROC curve: P(score of a random positive > a random negative), ties count ½. */
export function rocAuc(scores: ArrayLike<number>, labels: ArrayLike<number>): number {
  const idx = Array.from({ length: scores.length }, (_, i) => i).sort((a, b) => scores[a] - scores[b]);
  let positives = 0;
  let rankSum = 0;
  for (let i = 0; i < idx.length;) {
    let j = i;
    while (j + 1 < idx.length && scores[idx[j + 1]] === scores[idx[i]]) j++;
    const avgRank = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++)
      if (labels[idx[k]]) {
        positives++;
        rankSum += avgRank;
      }
    i = j + 1;
  }
  const negatives = idx.length - positives;
  if (positives === 0 || negatives === 0) return Number.NaN;
  return (rankSum - (positives * (positives + 1)) / 2) / (positives * negatives);
}

/**
 * FID proxy: mean discriminator score served when the top `share` of prompts by router score
 * go to the heavy model and the rest to the light one (higher = better images).
 */
export function servedQuality(routerScores: ArrayLike<number>, light: ArrayLike<number>, heavy: ArrayLike<number>, share: number): number {
  return cascadeServed(routerScores, light, light, heavy, share, -Infinity).meanServed;
}

/** What the hybrid cascade serves on a set of prompts. */
export interface CascadeOutcome {
  /** Mean quality served (of whichever model's image each prompt ends with). */
  meanServed: number;
  /** Share of prompts that end on the heavy model (routed + escalated). */
  heavyShare: number;
  /** Share of prompts that ran the light model and were then escalated (light pass wasted). */
  wastedLight: number;
}

/**
 * The HADIS hybrid cascade: the top `share` of prompts by router score go straight to the heavy
 * model; the rest run the light one, and the discriminator escalates those whose light score is
 * below `lightThreshold` (the artifact's `conf_thres` quantile of the light model's scores; −∞
 * for router only). `lightScore` decides escalation; `lightQuality`/`heavyQuality` are what is
 * served (the same P(real), or e.g. its log-odds). With `routerScores` null the router is random
 * and the result is its expectation.
 */
export function cascadeServed(
  routerScores: ArrayLike<number> | null,
  lightScore: ArrayLike<number>,
  lightQuality: ArrayLike<number>,
  heavyQuality: ArrayLike<number>,
  share: number,
  lightThreshold: number,
): CascadeOutcome {
  const n = lightScore.length;
  if (n === 0) return { meanServed: Number.NaN, heavyShare: Number.NaN, wastedLight: Number.NaN };
  const r = Math.min(Math.max(share, 0), 1);
  const routed = new Float64Array(n); // probability that prompt i is routed straight to heavy
  if (routerScores) {
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => routerScores[b] - routerScores[a]);
    for (let q = 0; q < Math.round(n * r); q++) routed[order[q]] = 1;
  } else routed.fill(r);
  let served = 0;
  let heavy = 0;
  let wasted = 0;
  for (let i = 0; i < n; i++) {
    const escalated = lightScore[i] < lightThreshold;
    const toHeavy = routed[i] + (escalated ? 1 - routed[i] : 0);
    served += toHeavy * heavyQuality[i] + (1 - toHeavy) * lightQuality[i];
    heavy += toHeavy;
    if (escalated) wasted += 1 - routed[i];
  }
  return { meanServed: served / n, heavyShare: heavy / n, wastedLight: wasted / n };
}

/** Mean, sample standard deviation and standard error of `values` (sd/√n; NaN sd for one value). */
export function summarise(values: readonly number[]): { mean: number; sd: number; se: number; n: number } {
  const n = values.length;
  const mean = values.reduce((s, v) => s + v, 0) / n;
  const sd = Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / (n - 1));
  return { mean, sd, se: sd / Math.sqrt(n), n };
}

/**
 * Standard error of a mean over J repeated-k-fold estimates, corrected for the overlap of their
 * training sets (Nadeau & Bengio 2003): sd · √(1/J + n_test/n_train), n_test/n_train = 1/(k−1).
 * The naive sd/√J understates it, since folds of the same prompts are not independent.
 */
export function correctedSe(values: readonly number[], k: number): number {
  const { sd, n } = summarise(values);
  return sd * Math.sqrt(1 / n + 1 / (k - 1));
}
