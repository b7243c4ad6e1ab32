/**
 * Learning router weights from measured quality: seeded train/test split, "hard prompt"
 * labels from discriminator scores, L2-regularised logistic regression (Newton's method),
 * ROC AUC, and the served-quality proxy of routing a share of prompts to the heavy model.
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
export function fitLogistic(x: readonly ArrayLike<number>[], y: ArrayLike<number>, options: { l2?: number; maxIterations?: number; tolerance?: number } = {}): LogisticModel {
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
  for (; iterations < maxIterations && !converged; ) {
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

/** Area under the ROC curve: P(score of a random positive > a random negative), ties count ½. */
export function rocAuc(scores: ArrayLike<number>, labels: ArrayLike<number>): number {
  const idx = Array.from({ length: scores.length }, (_, i) => i).sort((a, b) => scores[a] - scores[b]);
  let positives = 0;
  let rankSum = 0;
  for (let i = 0; i < idx.length; ) {
    let j = i;
    while (j + 1 < idx.length && scores[idx[j + 1]] === scores[idx[i]]) j++;
    const avgRank = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++) if (labels[idx[k]]) {
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
  const n = routerScores.length;
  if (n === 0) return Number.NaN;
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => routerScores[b] - routerScores[a]);
  const routed = Math.round(n * Math.min(Math.max(share, 0), 1));
  let sum = 0;
  for (let r = 0; r < n; r++) sum += r < routed ? heavy[order[r]] : light[order[r]];
  return sum / n;
}
