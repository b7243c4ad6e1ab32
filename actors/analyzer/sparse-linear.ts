/**
 * L2-regularised linear models on sparse rows (hashed word n-grams beside a few dense features):
 * logistic regression and ridge regression, fitted by truncated Newton (conjugate gradient on
 * Hessian-vector products, as LIBLINEAR's TRON does). `fitLogistic` in calibration.ts builds the
 * full Hessian, which is fine for eight features and not for thousands of hashed columns; npm's
 * linear models (ml-logistic-regression, ml-regression-multivariate-linear) take dense matrices
 * (4,000 prompts × 12,633 columns = 400 MB), and tfjs-node is a whole deep-learning runtime.
 */

/** A sparse row: `values[j]` at column `indices[j]` (columns may repeat; they add up). */
export interface SparseRow {
  indices: Int32Array;
  values: Float64Array;
}

/** A fitted linear model: score = intercept + Σ weights[index] · value. */
export interface SparseLinearModel {
  weights: Float64Array;
  intercept: number;
  /** Newton steps taken. */
  iterations: number;
  converged: boolean;
}

/** Options of `fitSparseLinear`. */
export interface SparseFitOptions {
  /** `logistic` (labels 0/1) or `squared` (any real target). */
  loss: "logistic" | "squared";
  /** Penalty λ on Σ w² (not the intercept), per training row: the objective is mean loss + λ/2 ‖w‖². */
  l2: number;
  maxIterations?: number;
  /** Stop when the gradient's norm falls below `tolerance` × its norm at w = 0. */
  tolerance?: number;
  /** Conjugate-gradient steps per Newton step. */
  maxCgSteps?: number;
}

/** intercept + Σ weights · row. */
export function sparseScore(model: Pick<SparseLinearModel, "weights" | "intercept">, row: SparseRow): number {
  let z = model.intercept;
  const { indices, values } = row;
  for (let j = 0; j < indices.length; j++) z += model.weights[indices[j]] * values[j];
  return z;
}

const sigmoid = (z: number) => (z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z)));

/**
 * Fits an L2-penalised linear model on `rows` (columns 0..dim−1) by truncated Newton with a
 * backtracking line search. Deterministic: the same rows give the same weights.
 */
export function fitSparseLinear(
  rows: readonly SparseRow[],
  y: ArrayLike<number>,
  dim: number,
  options: SparseFitOptions,
): SparseLinearModel {
  const n = rows.length;
  if (n === 0) throw new Error("no training rows");
  if (y.length !== n) throw new Error(`${n} rows but ${y.length} targets`);
  const lambda = options.l2;
  if (!(lambda > 0)) throw new Error(`l2 must be > 0, got ${lambda}`);
  const logistic = options.loss === "logistic";
  const maxIterations = options.maxIterations ?? 50;
  const tolerance = options.tolerance ?? 1e-6;
  const maxCg = options.maxCgSteps ?? 100;
  // Parameters: w[0..dim) and the intercept at w[dim].
  const d = dim + 1;
  const w = new Float64Array(d);
  const z = new Float64Array(n);
  const curvature = new Float64Array(n);

  const margins = (at: Float64Array, out: Float64Array) => {
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      let s = at[dim];
      for (let j = 0; j < r.indices.length; j++) s += at[r.indices[j]] * r.values[j];
      out[i] = s;
    }
  };
  const objective = (at: Float64Array, m: Float64Array) => {
    let loss = 0;
    for (let i = 0; i < n; i++) {
      if (logistic) {
        const t = y[i] ? m[i] : -m[i];
        loss += t > 0 ? Math.log1p(Math.exp(-t)) : -t + Math.log1p(Math.exp(t));
      } else loss += 0.5 * (m[i] - y[i]) ** 2;
    }
    let penalty = 0;
    for (let k = 0; k < dim; k++) penalty += at[k] * at[k];
    return loss / n + 0.5 * lambda * penalty;
  };
  /** out = X̃ᵀ v over the rows (X̃ = rows with a constant column for the intercept). */
  const transposeTimes = (v: Float64Array, out: Float64Array) => {
    out.fill(0);
    for (let i = 0; i < n; i++) {
      if (v[i] === 0) continue;
      const r = rows[i];
      for (let j = 0; j < r.indices.length; j++) out[r.indices[j]] += r.values[j] * v[i];
      out[dim] += v[i];
    }
  };

  const grad = new Float64Array(d);
  const residual = new Float64Array(n);
  const gradient = () => {
    for (let i = 0; i < n; i++) {
      if (logistic) {
        const p = sigmoid(z[i]);
        residual[i] = (p - y[i]) / n;
        curvature[i] = Math.max(p * (1 - p), 1e-12) / n;
      } else {
        residual[i] = (z[i] - y[i]) / n;
        curvature[i] = 1 / n;
      }
    }
    transposeTimes(residual, grad);
    for (let k = 0; k < dim; k++) grad[k] += lambda * w[k];
    return Math.sqrt(dot(grad, grad));
  };

  // Hessian-vector product: X̃ᵀ D X̃ v + λ v (no penalty on the intercept; a tiny ridge keeps it definite).
  const xv = new Float64Array(n);
  const hessianTimes = (v: Float64Array, out: Float64Array) => {
    margins(v, xv);
    for (let i = 0; i < n; i++) xv[i] *= curvature[i];
    transposeTimes(xv, out);
    for (let k = 0; k < dim; k++) out[k] += lambda * v[k];
    out[dim] += 1e-10 * v[dim];
  };

  margins(w, z);
  let value = objective(w, z);
  const g0 = gradient();
  let gNorm = g0;
  let iterations = 0;
  let converged = gNorm <= tolerance * g0 || g0 === 0;
  const step = new Float64Array(d);
  const r = new Float64Array(d);
  const p = new Float64Array(d);
  const hp = new Float64Array(d);
  const trial = new Float64Array(d);
  const zTrial = new Float64Array(n);
  while (!converged && iterations < maxIterations) {
    iterations++;
    // CG on H s = −g, stopped when the residual is small relative to ‖g‖ (inexact Newton).
    step.fill(0);
    for (let k = 0; k < d; k++) r[k] = -grad[k];
    p.set(r);
    let rr = dot(r, r);
    const stopAt = Math.min(0.5, Math.sqrt(gNorm)) * gNorm;
    for (let c = 0; c < maxCg && Math.sqrt(rr) > stopAt; c++) {
      hessianTimes(p, hp);
      const php = dot(p, hp);
      if (!(php > 0)) break;
      const alpha = rr / php;
      for (let k = 0; k < d; k++) {
        step[k] += alpha * p[k];
        r[k] -= alpha * hp[k];
      }
      const rrNext = dot(r, r);
      const beta = rrNext / rr;
      rr = rrNext;
      for (let k = 0; k < d; k++) p[k] = r[k] + beta * p[k];
    }
    // Backtracking (Armijo) on the full step; squared loss takes the first one.
    const slope = dot(grad, step);
    let t = 1;
    let next = value;
    for (let halvings = 0; halvings < 30; halvings++) {
      for (let k = 0; k < d; k++) trial[k] = w[k] + t * step[k];
      margins(trial, zTrial);
      next = objective(trial, zTrial);
      if (next <= value + 1e-4 * t * slope) break;
      t /= 2;
    }
    if (!(next <= value)) break;
    w.set(trial);
    z.set(zTrial);
    value = next;
    gNorm = gradient();
    converged = gNorm <= tolerance * g0;
  }
  return { weights: w.slice(0, dim), intercept: w[dim], iterations, converged };
}

function dot(a: Float64Array, b: Float64Array): number {
  let s = 0;
  for (let k = 0; k < a.length; k++) s += a[k] * b[k];
  return s;
}
