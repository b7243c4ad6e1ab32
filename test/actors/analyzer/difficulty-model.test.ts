/** The learned difficulty model: the sparse fitter, n-gram hashing, training and splitting, the held-out study, and the model file's schema. */
import { describe, expect, it } from "vitest";
import { fitLogistic, mulberry32, rocAuc, solveLinear } from "../../../actors/analyzer/calibration.ts";
import { encodePrompt, pairScore, parseDifficultyModel, type DifficultyModelFile } from "../../../actors/analyzer/difficulty-model.ts";
import {
  evaluateHeldOut,
  pairQuality,
  raisesServedQuality,
  summariseStudy,
  tablePoints,
  type PairQuality,
} from "../../../actors/analyzer/difficulty-study.ts";
import {
  crossFittedScores,
  fitNgramRidge,
  foldsByPrompt,
  ngramFitScore,
  splitByPrompt,
  toDifficultyModelFile,
} from "../../../actors/analyzer/difficulty-training.ts";
import { fitSparseLinear, sparseScore, type SparseRow } from "../../../actors/analyzer/sparse-linear.ts";
import { fnv1a32, hashedNgrams, ngramRow, promptWords } from "../../../actors/analyzer/text-features.ts";

const dense = (x: readonly number[]): SparseRow => ({ indices: Int32Array.from(x, (_, k) => k), values: Float64Array.from(x) });

describe("fitSparseLinear", () => {
  it("matches the closed-form ridge solution (intercept unpenalised)", () => {
    const rand = mulberry32(3);
    const x = Array.from({ length: 40 }, () => [rand() - 0.5, rand() * 2, rand() - 0.2]);
    const y = x.map((r) => 1.5 * r[0] - 2 * r[1] + 0.5 + 0.1 * (rand() - 0.5));
    const l2 = 0.05;
    const n = x.length;
    // Normal equations of mean ½(ŷ − y)² + λ/2 ‖w‖² over [w, b]: (XᵀX/n + λI') β = Xᵀy/n.
    const a = Array.from({ length: 4 }, () => new Float64Array(4));
    const b = new Float64Array(4);
    for (let i = 0; i < n; i++) {
      const row = [...x[i], 1];
      for (let p = 0; p < 4; p++) {
        b[p] += (row[p] * y[i]) / n;
        for (let q = 0; q < 4; q++) a[p][q] += (row[p] * row[q]) / n;
      }
    }
    for (let p = 0; p < 3; p++) a[p][p] += l2;
    const exact = solveLinear(a, b);
    const fit = fitSparseLinear(x.map(dense), y, 3, { loss: "squared", l2, tolerance: 1e-10 });
    for (let k = 0; k < 3; k++) expect(fit.weights[k]).toBeCloseTo(exact[k], 6);
    expect(fit.intercept).toBeCloseTo(exact[3], 6);
  });

  it("agrees with the dense Newton logistic regression at the same penalty", () => {
    const rand = mulberry32(11);
    const x = Array.from({ length: 200 }, () => [rand() * 2 - 1, rand() * 2 - 1]);
    const y = x.map((r) => (r[0] - 0.5 * r[1] + 0.3 * (rand() - 0.5) > 0 ? 1 : 0));
    const reference = fitLogistic(x, y, { l2: 0.01 });
    const fit = fitSparseLinear(x.map(dense), y, 2, { loss: "logistic", l2: 0.01, tolerance: 1e-10 });
    expect(fit.converged).toBe(true);
    for (let k = 0; k < 2; k++) expect(fit.weights[k]).toBeCloseTo(reference.weights[k], 5);
    expect(fit.intercept).toBeCloseTo(reference.intercept, 5);
  });

  it("recovers the separating word of a hand-made separable set", () => {
    // Column 0 = "storm" (hard), column 1 = "cat" (easy), column 2 = a word in every prompt.
    const rows: SparseRow[] = [];
    const y: number[] = [];
    for (let i = 0; i < 30; i++) {
      const hard = i % 2 === 0;
      rows.push({ indices: Int32Array.from([hard ? 0 : 1, 2]), values: Float64Array.from([1, 1]) });
      y.push(hard ? 1 : 0);
    }
    const fit = fitSparseLinear(rows, y, 3, { loss: "logistic", l2: 1e-3 });
    expect(fit.weights[0]).toBeGreaterThan(1);
    expect(fit.weights[1]).toBeLessThan(-1);
    rows.forEach((r, i) => expect(sparseScore(fit, r) > 0).toBe(y[i] === 1));
  });

  it("refuses a non-positive penalty and mismatched targets", () => {
    expect(() => fitSparseLinear([dense([1])], [1], 1, { loss: "squared", l2: 0 })).toThrow(/l2/);
    expect(() => fitSparseLinear([dense([1])], [1, 0], 1, { loss: "squared", l2: 1 })).toThrow(/targets/);
  });
});

describe("hashed n-grams", () => {
  it("hashes FNV-1a as published", () => {
    expect(fnv1a32("")).toBe(0x811c9dc5);
    expect(fnv1a32("a")).toBe(0xe40c292c);
  });
  it("gives distinct, ascending columns below 2^bits; a unigram and a bigram do not share a column by name", () => {
    const words = promptWords("A red ball sits in the grass, on a GREEN field!");
    expect(words).toEqual(["a", "red", "ball", "sits", "in", "the", "grass", "on", "a", "green", "field"]);
    const cols = hashedNgrams(words, 18, [1, 2]);
    expect([...cols]).toEqual([...new Set(cols)].sort((a, b) => a - b));
    expect(cols.every((c) => c >= 0 && c < 2 ** 18)).toBe(true);
    // 10 distinct unigrams ("a" twice) + 12 bigrams with the start and end markers.
    expect(cols.length).toBe(22);
    expect(hashedNgrams(["red"], 18, [1])[0]).not.toBe(hashedNgrams(["red"], 18, [2])[0]);
    expect(hashedNgrams(words, 18, [1, 2])).toEqual(cols);
  });
  it("gives a row of unit norm, and an empty row for an empty prompt", () => {
    const row = ngramRow(promptWords("a dog on a log"), 16, [1, 2]);
    expect(row.values.reduce((s, v) => s + v * v, 0)).toBeCloseTo(1, 12);
    expect(ngramRow(promptWords("  !! "), 16, [1, 2]).indices.length).toBe(0);
  });
});

describe("foldsByPrompt and crossFittedScores", () => {
  it("partitions by prompt text into k folds", () => {
    const prompts = Array.from({ length: 100 }, (_, i) => `prompt ${i % 37}`);
    const folds = foldsByPrompt(prompts, 4, 2);
    expect(folds.flat().sort((a, b) => a - b)).toEqual(prompts.map((_, i) => i));
    // No prompt text in two folds.
    const shared = folds.flatMap((fold, f) => {
      const texts = new Set(fold.map((i) => prompts[i]));
      return folds.flatMap((other, g) => (g !== f && other.some((i) => texts.has(prompts[i])) ? [`${f}/${g}`] : []));
    });
    expect(shared).toEqual([]);
  });
  it("scores every prompt with a fit that did not see it: a prompt's own noise does not help it", () => {
    // Targets are pure noise: in sample a fit memorises them, out of fold it cannot.
    const rand = mulberry32(5);
    const prompts = Array.from({ length: 150 }, (_, i) => `thing ${i} word${i % 7}`);
    const target = prompts.map(() => rand() * 2 - 1);
    const rows = prompts.map((p) => ngramRow(promptWords(p), 16, [1]));
    const labels = Uint8Array.from(target, (t) => (t > 0 ? 1 : 0));
    const all = prompts.map((_, i) => i);
    const inSample = fitNgramRidge(rows, target, labels, all, { seed: 1, grid: [1e-4] });
    const inSampleAuc = rocAuc(
      rows.map((r) => ngramFitScore(inSample, r)),
      labels,
    );
    const crossAuc = rocAuc(crossFittedScores(rows, target, prompts, 5, 1), labels);
    expect(inSampleAuc).toBeGreaterThan(0.9);
    expect(Math.abs(crossAuc - 0.5)).toBeLessThan(0.15);
  });
});

describe("splitByPrompt", () => {
  it("puts every copy of a prompt on one side, covers every row once, and is seeded", () => {
    const prompts = Array.from({ length: 300 }, (_, i) => `prompt ${i % 120}`);
    const { train, test } = splitByPrompt(prompts, 0.8, 5);
    expect([...train, ...test].sort((a, b) => a - b)).toEqual(prompts.map((_, i) => i));
    const trainTexts = new Set(train.map((i) => prompts[i]));
    expect(test.some((i) => trainTexts.has(prompts[i]))).toBe(false);
    expect(splitByPrompt(prompts, 0.8, 5)).toEqual({ train, test });
    expect(splitByPrompt(prompts, 0.8, 6).test).not.toEqual(test);
  });
});

/** Prompts where "storm" makes the heavy model gain (target +2) and "cat" makes it lose (−2), with noise. */
function stormSet(n: number, seed: number) {
  const rand = mulberry32(seed);
  const nouns = ["boat", "tree", "house", "car", "bird", "lamp", "road", "hill"];
  const prompts: string[] = [];
  const target: number[] = [];
  for (let i = 0; i < n; i++) {
    const storm = rand() < 0.5;
    prompts.push(`a ${nouns[Math.floor(rand() * nouns.length)]} ${storm ? "in a storm" : "with a cat"} ${i}`);
    target.push((storm ? 2 : -2) + (rand() - 0.5));
  }
  return { prompts, target, labels: Uint8Array.from(target, (t) => (t > 0 ? 1 : 0)) };
}

describe("fitNgramRidge", () => {
  it("learns from words and ranks held-out prompts it never saw perfectly", () => {
    const { prompts, target, labels } = stormSet(200, 7);
    const rows = prompts.map((p) => ngramRow(promptWords(p), 16, [1, 2]));
    const { train, test } = splitByPrompt(prompts, 0.7, 1);
    const fit = fitNgramRidge(rows, target, labels, train, { seed: 1 });
    expect(fit.converged).toBe(true);
    const hard = test.filter((i) => labels[i] === 1).map((i) => ngramFitScore(fit, rows[i]));
    const easy = test.filter((i) => labels[i] === 0).map((i) => ngramFitScore(fit, rows[i]));
    expect(Math.min(...hard)).toBeGreaterThan(Math.max(...easy));
  });

  it("round-trips through the model file: the served score is the fit's, z-normalised", () => {
    const { prompts, target, labels } = stormSet(120, 9);
    const rows = prompts.map((p) => ngramRow(promptWords(p), 16, [1, 2]));
    const all = prompts.map((_, i) => i);
    const fit = fitNgramRidge(rows, target, labels, all, { seed: 1, grid: [1e-3] });
    const raw = rows.map((r) => ngramFitScore(fit, r));
    const file = toDifficultyModelFile([{ light: "l", heavy: "h", fit, referenceScores: raw, use: true }], 16, [1, 2], "test");
    const model = parseDifficultyModel(JSON.parse(JSON.stringify(file)));
    const pair = model.pairs.get("l→h")!;
    const mean = raw.reduce((s, v) => s + v, 0) / raw.length;
    const sd = Math.sqrt(raw.reduce((s, v) => s + (v - mean) ** 2, 0) / raw.length);
    prompts.forEach((p, i) => expect(pairScore(pair, encodePrompt(model, p))).toBeCloseTo((raw[i] - mean) / sd, 3));
    // A word the fit never saw weighs nothing: the prompt scores as the rest of it.
    expect(pairScore(pair, encodePrompt(model, "zyxwv"))).toBeCloseTo((fit.intercept + 0 - mean) / sd, 3);
  });
});

describe("held-out study", () => {
  // Four prompts: the heavy model gains on prompts 2 and 3 only.
  const q: PairQuality = {
    light: Float64Array.from([0.5, 0.4, 0.1, 0.2]),
    heavy: Float64Array.from([0.5, 0.4, 0.9, 0.6]),
    gapT: Float64Array.from([0, 0, 3, 2]),
    lightSorted: Float64Array.from([0.1, 0.2, 0.4, 0.5]),
  };
  const test = [0, 1, 2, 3];
  const labels = Uint8Array.from([0, 0, 1, 1]);
  const points = [{ share: 0.5, conf: 0 }];

  it("scores a known ranking: AUC 1 and the oracle's served quality, reversed AUC 0, random the expectation", () => {
    const perfect = evaluateHeldOut([0, 1, 3, 2], test, labels, q, points);
    expect(perfect.auc).toBe(1);
    expect(perfect.served[0]).toBeCloseTo((0.5 + 0.4 + 0.9 + 0.6) / 4, 12);
    const reversed = evaluateHeldOut([3, 2, 0, 1], test, labels, q, points);
    expect(reversed.auc).toBe(0);
    expect(reversed.served[0]).toBeCloseTo((0.5 + 0.4 + 0.1 + 0.2) / 4, 12);
    const random = evaluateHeldOut(null, test, labels, q, points, [0.1, 0.2, 0.3, 0.4]);
    // Each prompt goes to heavy with probability ½: ½ light + ½ heavy.
    expect(random.served[0]).toBeCloseTo((0.5 + 0.4 + 0.5 + 0.4) / 4, 12);
  });

  it("escalates light images below the conf quantile in the cascade", () => {
    // conf 0.25: threshold = lightSorted[1] = 0.2; prompt 2 (0.1) is escalated when not routed.
    const r = evaluateHeldOut([3, 2, 1, 0], test, labels, q, [{ share: 0.25, conf: 0.25 }]);
    expect(r.served[0]).toBeCloseTo((0.5 + 0.4 + 0.9 + 0.2) / 4, 12);
  });

  it("says a scorer raises served quality only when its gain clears two standard errors", () => {
    const study = (gains: number[]) => ({
      points,
      seeds: gains.map((_, i) => i + 1),
      byScorer: {
        reference: { auc: gains.map(() => 0.5), served: gains.map(() => [0.1]) },
        learned: { auc: gains.map(() => 0.6), served: gains.map((g) => [0.1 + g]) },
      },
    });
    expect(raisesServedQuality(summariseStudy(study([0.01, 0.012, 0.011, 0.009, 0.01])).learned)).toBe(true);
    expect(raisesServedQuality(summariseStudy(study([0.01, -0.012, 0.011, -0.009, 0.002])).learned)).toBe(false);
    expect(raisesServedQuality(summariseStudy(study([-0.01, -0.012, -0.011, -0.009, -0.01])).learned)).toBe(false);
  });

  it("reads the pair's operating points from the tables, and defaults when none lists the pair", () => {
    const rows = [
      { lightId: 2, heavyId: 3, routerThreshold: 0.2, discThreshold: 0.5, heavyShare: 0.6, fid: 19.29 },
      { lightId: 2, heavyId: 3, routerThreshold: 0.2, discThreshold: 0.5, heavyShare: 0.6, fid: 19.29 },
      { lightId: 2, heavyId: 3, routerThreshold: 0.1, discThreshold: 0, heavyShare: 0.1, fid: 20.16 },
      { lightId: 0, heavyId: 1, routerThreshold: 0, discThreshold: 0, heavyShare: 0, fid: 29.75 },
    ];
    expect(tablePoints(rows, 2, 3)).toEqual([
      { share: 0.1, conf: 0 },
      { share: 0.2, conf: 0.5 },
    ]);
    expect(tablePoints(rows, 0, 1).map((p) => p.share)).toEqual([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]);
  });

  it("computes Welch's t per prompt from the images", () => {
    const light = Float64Array.from([0.1, 0.1, 0.2, 0.2, 0.5, 0.5, 0.6, 0.6]);
    const heavy = Float64Array.from([0.5, 0.5, 0.6, 0.6, 0.1, 0.1, 0.2, 0.2]);
    const pq = pairQuality(light, heavy, 4);
    expect(pq.gapT[0]).toBeGreaterThan(0);
    expect(pq.gapT[1]).toBeLessThan(0);
    expect([...pq.light]).toEqual([0.15000000000000002, 0.55]);
  });
});

describe("difficulty-model file schema", () => {
  const good = (): DifficultyModelFile => ({
    version: 1,
    kind: "hashed-ngram-linear",
    hashBits: 8,
    ngramOrders: [1, 2],
    columns: [3, 7, 200],
    pairs: [{ light: "l", heavy: "h", intercept: 0.1, weights: [1, -1, 0.5], scoreMean: 0, scoreStd: 1, use: true }],
    source: "test",
  });
  const refusal = (edit: (f: DifficultyModelFile & Record<string, unknown>) => void): string => {
    const f = good() as DifficultyModelFile & Record<string, unknown>;
    edit(f);
    try {
      parseDifficultyModel(f);
    } catch (err) {
      return (err as Error).message;
    }
    return "accepted";
  };

  it("accepts a well-formed file", () => {
    const m = parseDifficultyModel(good());
    expect(m.pairs.get("l→h")?.weights).toEqual(Float64Array.from([1, -1, 0.5]));
    expect(m.slotOf.get(200)).toBe(2);
  });
  it("refuses a malformed file, naming the field at fault", () => {
    expect(refusal((f) => (f.pairs[0].weights = [1, 2]))).toMatch(/pairs\.0\.weights: has 2 weights for 3 columns/);
    expect(refusal((f) => (f.columns = [3, 3, 200]))).toMatch(/columns\.1: .*ascending/);
    expect(refusal((f) => (f.columns = [3, 7, 256]))).toMatch(/columns\.2: must be below 2\^hashBits/);
    expect(refusal((f) => f.pairs.push({ ...f.pairs[0] }))).toMatch(/pair l→h appears twice/);
    expect(refusal((f) => (f.pairs[0].weights = [1, Number.NaN, 0]))).toMatch(/pairs\.0\.weights\.1/);
    expect(refusal((f) => (f.pairs[0].scoreStd = 0))).toMatch(/scoreStd: must be > 0/);
    expect(refusal((f) => delete (f.pairs[0] as Record<string, unknown>).use)).toMatch(/pairs\.0\.use/);
    expect(refusal((f) => ((f as Record<string, unknown>).version = 2))).toMatch(/version/);
    expect(refusal((f) => (f.ngramOrders = []))).toMatch(/ngramOrders/);
    expect(refusal((f) => (f.pairs = []))).toMatch(/pairs/);
    expect(refusal((f) => ((f.pairs[0] as Record<string, unknown>).crossFitted = [1, 2]))).toMatch(/pairs\.0\.crossFitted: needs crossFit/);
    expect(
      refusal((f) => {
        f.crossFit = { folds: 5, seed: 1, prompts: 3, promptsHash: "0badcafe" };
        (f.pairs[0] as Record<string, unknown>).crossFitted = [1, 2];
      }),
    ).toMatch(/pairs\.0\.crossFitted: has 2 scores for 3 prompts/);
    expect(refusal((f) => (f.crossFit = { folds: 5, seed: 1, prompts: 3, promptsHash: "xyz" }))).toMatch(/crossFit\.promptsHash/);
  });
});
