/**
 * Training the learned difficulty model: splits by prompt text (a prompt that appears twice is on
 * one side only), the per-prompt target (Welch's t of the heavy − light image log-odds, the
 * statistic behind calibration.ts's default "hard" label), ridge regression on hashed word
 * n-grams with the penalty chosen by inner cross-validation, and the model file it ships as.
 */
import { kFolds, rocAuc, splitRows, aboveLabels } from "./calibration.ts";
import type { DifficultyModelFile } from "./difficulty-model.ts";
import { fitSparseLinear, sparseScore, type SparseRow } from "./sparse-linear.ts";

/** |t| beyond this is clipped: four images a model give Welch's t heavy tails. */
export const TARGET_CLIP = 4;

/** Ridge penalties tried by the inner cross-validation (per row; rows have unit norm). */
export const NGRAM_L2_GRID = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2];

/**
 * Seeded train/test split of prompt rows by their trimmed text: all rows of one text go to the
 * same side, so a duplicated prompt is never both learned and tested.
 */
export function splitByPrompt(prompts: readonly string[], trainFraction: number, seed: number): { train: number[]; test: number[] } {
  const groupOf = new Map<string, number>();
  const group = prompts.map((p) => {
    const key = p.trim();
    let g = groupOf.get(key);
    if (g === undefined) groupOf.set(key, (g = groupOf.size));
    return g;
  });
  const trainGroups = new Set(splitRows(groupOf.size, trainFraction, seed).train);
  const train: number[] = [];
  const test: number[] = [];
  group.forEach((g, i) => (trainGroups.has(g) ? train : test).push(i));
  return { train, test };
}

/** Seeded k-fold partition of prompt rows by their trimmed text (every copy of a text in one fold). */
export function foldsByPrompt(prompts: readonly string[], k: number, seed: number): number[][] {
  const groupOf = new Map<string, number>();
  const group = prompts.map((p) => {
    const key = p.trim();
    let g = groupOf.get(key);
    if (g === undefined) groupOf.set(key, (g = groupOf.size));
    return g;
  });
  const foldOfGroup = new Int32Array(groupOf.size);
  kFolds(groupOf.size, k, seed).forEach((groups, f) => groups.forEach((g) => (foldOfGroup[g] = f)));
  const folds: number[][] = Array.from({ length: k }, () => []);
  group.forEach((g, i) => folds[foldOfGroup[g]].push(i));
  return folds;
}

/**
 * Out-of-fold scores: every row scored by the n-gram ridge fitted (penalty by inner
 * cross-validation, labels cut at that fit's training median) on the folds without it.
 */
export function crossFittedScores(
  rows: readonly SparseRow[],
  target: ArrayLike<number>,
  prompts: readonly string[],
  k: number,
  seed: number,
): Float64Array {
  const out = new Float64Array(rows.length);
  const folds = foldsByPrompt(prompts, k, seed);
  folds.forEach((held, f) => {
    const train = folds.filter((_, g) => g !== f).flat();
    const fit = fitNgramRidge(rows, target, hardLabelsFrom(target, train), train, { seed: seed + f });
    for (const i of held) out[i] = ngramFitScore(fit, rows[i]);
  });
  return out;
}

/** The median of `values` at `rows` (upper middle for an even count, as calibrate's cut). */
export function medianAt(values: ArrayLike<number>, rows: readonly number[]): number {
  const s = Float64Array.from(rows, (i) => values[i]).sort();
  return s[s.length >> 1];
}

/** "Hard" labels as calibration.ts's default: the statistic above its median over the training rows. */
export function hardLabelsFrom(stat: ArrayLike<number>, train: readonly number[]): Uint8Array {
  return aboveLabels(stat, medianAt(stat, train));
}

/** Rows with their hashed columns renumbered 0..k−1 over the columns the given rows use (an unused column's weight is 0). */
export function compactColumns(
  rows: readonly SparseRow[],
  fitRows: readonly number[],
): { columns: Int32Array; compact: (row: SparseRow) => SparseRow } {
  const used = new Set<number>();
  for (const i of fitRows) for (const c of rows[i].indices) used.add(c);
  const columns = Int32Array.from(used).sort();
  const slot = new Map<number, number>();
  columns.forEach((c, k) => slot.set(c, k));
  const compact = (row: SparseRow): SparseRow => {
    const idx: number[] = [];
    const val: number[] = [];
    row.indices.forEach((c, j) => {
      const s = slot.get(c);
      if (s !== undefined) {
        idx.push(s);
        val.push(row.values[j]);
      }
    });
    return { indices: Int32Array.from(idx), values: Float64Array.from(val) };
  };
  return { columns, compact };
}

/** A fitted n-gram model over hashed columns. */
export interface NgramFit {
  /** Hashed columns with a weight, ascending, and their weights. */
  columns: Int32Array;
  weights: Float64Array;
  intercept: number;
  l2: number;
  /** Mean held-out AUC of the inner cross-validation at the chosen penalty. */
  cvAuc: number;
  converged: boolean;
}

/**
 * Ridge regression of the clipped target on hashed n-gram rows over `train` (or, with `loss:
 * "logistic"`, logistic regression of the labels), the penalty picked from `grid` by
 * `folds`-fold cross-validation (ROC AUC against the rows' `labels`; ties go to the earlier,
 * smaller penalty).
 */
export function fitNgramRidge(
  rows: readonly SparseRow[],
  target: ArrayLike<number>,
  labels: ArrayLike<number>,
  train: readonly number[],
  options: { grid?: readonly number[]; folds?: number; seed: number; loss?: "squared" | "logistic" },
): NgramFit {
  const grid = options.grid ?? NGRAM_L2_GRID;
  const k = options.folds ?? 5;
  const loss = options.loss ?? "squared";
  const y = loss === "squared" ? (i: number) => Math.max(-TARGET_CLIP, Math.min(TARGET_CLIP, target[i])) : (i: number) => labels[i];
  const fit = (fitRows: readonly number[], l2: number) => {
    const { columns, compact } = compactColumns(rows, fitRows);
    const model = fitSparseLinear(
      fitRows.map((i) => compact(rows[i])),
      fitRows.map(y),
      columns.length,
      { loss, l2 },
    );
    return { columns, compact, model };
  };
  let best = { l2: grid[0], cvAuc: -Infinity };
  if (grid.length > 1) {
    const parts = kFolds(train, k, options.seed);
    for (const l2 of grid) {
      let sum = 0;
      for (let f = 0; f < k; f++) {
        const { compact, model } = fit(parts.filter((_, g) => g !== f).flat(), l2);
        sum += rocAuc(
          parts[f].map((i) => sparseScore(model, compact(rows[i]))),
          parts[f].map((i) => labels[i]),
        );
      }
      if (sum / k > best.cvAuc) best = { l2, cvAuc: sum / k };
    }
  } else best = { l2: grid[0], cvAuc: Number.NaN };
  const { columns, model } = fit(train, best.l2);
  return { columns, weights: model.weights, intercept: model.intercept, l2: best.l2, cvAuc: best.cvAuc, converged: model.converged };
}

/** Scores a hashed row under a fit (columns not in the fit weigh 0). */
export function ngramFitScore(fit: Pick<NgramFit, "columns" | "weights" | "intercept">, row: SparseRow): number {
  let z = fit.intercept;
  for (let j = 0; j < row.indices.length; j++) {
    const c = row.indices[j];
    // Binary search: fits are scored offline only; the served model uses a hash map.
    let lo = 0;
    let hi = fit.columns.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (fit.columns[mid] < c) lo = mid + 1;
      else if (fit.columns[mid] > c) hi = mid - 1;
      else {
        z += fit.weights[mid] * row.values[j];
        break;
      }
    }
  }
  return z;
}

/** One pair's fit as it goes into the model file. */
export interface PairFitEntry {
  light: string;
  heavy: string;
  fit: NgramFit;
  /** Raw scores of the reference prompts under the fit (their mean and sd z-normalise served scores). */
  referenceScores: ArrayLike<number>;
  use: boolean;
  /** Out-of-fold raw scores of the reference prompts (`crossFittedScores`), written z-normalised. */
  crossFitted?: ArrayLike<number>;
  /** Anything else to record beside the pair (target, held-out figures). */
  extra?: Record<string, unknown>;
}

/** Significant digits kept of each weight in the file (scores move by far less than their spread: tested). */
const WEIGHT_DIGITS = 5;

/** Mean and population sd of values (sd 1 when they do not vary). */
function meanStd(values: ArrayLike<number>): { mean: number; std: number } {
  const v = Array.from(values);
  const mean = v.reduce((s, x) => s + x, 0) / v.length;
  const std = Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / v.length);
  return { mean, std: std > 0 ? std : 1 };
}

/**
 * The model file for the pairs' fits: one shared column list, each pair's weights aligned to it;
 * `crossFit` names the reference prompts the entries' cross-fitted scores are for.
 */
export function toDifficultyModelFile(
  entries: readonly PairFitEntry[],
  hashBits: number,
  ngramOrders: readonly number[],
  source: string,
  crossFit?: NonNullable<DifficultyModelFile["crossFit"]>,
): DifficultyModelFile {
  const all = new Set<number>();
  for (const e of entries) for (const c of e.fit.columns) all.add(c);
  const columns = Int32Array.from(all).sort();
  const round = (x: number) => Number(x.toPrecision(WEIGHT_DIGITS));
  const pairs = entries.map((e) => {
    const weights = new Float64Array(columns.length);
    let j = 0;
    e.fit.columns.forEach((c, k) => {
      while (columns[j] !== c) j++;
      weights[j] = e.fit.weights[k];
    });
    const { mean, std } = meanStd(e.referenceScores);
    const cross = e.crossFitted ? meanStd(e.crossFitted) : undefined;
    return {
      light: e.light,
      heavy: e.heavy,
      intercept: round(e.fit.intercept),
      weights: Array.from(weights, round),
      scoreMean: round(mean),
      scoreStd: round(std),
      use: e.use,
      l2: e.fit.l2,
      ...e.extra,
      ...(e.crossFitted && cross
        ? { crossFitted: Array.from(e.crossFitted, (v) => Number(((v - cross.mean) / cross.std).toPrecision(4))) }
        : {}),
    };
  });
  return {
    version: 1,
    kind: "hashed-ngram-linear",
    hashBits,
    ngramOrders: [...ngramOrders],
    columns: Array.from(columns),
    pairs,
    ...(crossFit ? { crossFit } : {}),
    source,
  };
}
