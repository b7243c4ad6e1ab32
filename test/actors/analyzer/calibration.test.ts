/** Logistic regression, ROC AUC, splitting, labels and the served-quality proxy on tiny hand-made data. */
import { describe, expect, it } from "vitest";
import { exactMatchRate, pearson, ranks, spearman } from "../../../actors/analyzer/agreement.ts";
import { fitLogistic, hardLabels, lightFailsLabels, median, mulberry32, rocAuc, servedQuality, solveLinear, splitRows } from "../../../actors/analyzer/calibration.ts";

describe("rocAuc", () => {
  it("is 1 for a perfect ranking, 0 reversed, 0.5 all tied", () => {
    expect(rocAuc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])).toBe(1);
    expect(rocAuc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1])).toBe(0);
    expect(rocAuc([1, 1, 1, 1], [0, 1, 0, 1])).toBe(0.5);
  });
  it("counts pairs: 3 of 4 positive-negative pairs ordered right → 0.75", () => {
    // positives 0.35, 0.8; negatives 0.1, 0.4: (0.35>0.1 ✓, 0.35>0.4 ✗, 0.8>0.1 ✓, 0.8>0.4 ✓)
    expect(rocAuc([0.1, 0.35, 0.4, 0.8], [0, 1, 0, 1])).toBe(0.75);
  });
  it("gives a tied pair half credit and NaN with one class", () => {
    expect(rocAuc([0.5, 0.5], [0, 1])).toBe(0.5);
    expect(Number.isNaN(rocAuc([1, 2], [1, 1]))).toBe(true);
  });
});

describe("fitLogistic", () => {
  it("solves the likelihood equations on overlapping 1-D data", () => {
    // P(y=1) rises with x, with overlap so the maximum-likelihood fit is finite.
    const x = [[0], [1], [1.5], [2], [2], [2.5], [3], [4]];
    const y = [0, 0, 1, 1, 0, 0, 1, 1];
    const m = fitLogistic(x, y, { l2: 0 });
    expect(m.converged).toBe(true);
    expect(m.weights[0]).toBeGreaterThan(0);
    // At the optimum Σ(y − p) = 0 and Σ(y − p)·x = 0.
    let g0 = 0;
    let g1 = 0;
    x.forEach(([v], i) => {
      const p = 1 / (1 + Math.exp(-(m.intercept + m.weights[0] * v)));
      g0 += y[i] - p;
      g1 += (y[i] - p) * v;
    });
    expect(Math.abs(g0)).toBeLessThan(1e-8);
    expect(Math.abs(g1)).toBeLessThan(1e-8);
  });
  it("matches the closed form with no features: intercept = log-odds of the base rate", () => {
    const m = fitLogistic([[0], [0], [0], [0]], [1, 0, 0, 0], { l2: 0 });
    expect(m.intercept).toBeCloseTo(Math.log(1 / 3), 6);
  });
  it("stays finite on separable data thanks to the L2 penalty", () => {
    const m = fitLogistic([[-1], [-2], [1], [2]], [0, 0, 1, 1], { l2: 0.01 });
    expect(Number.isFinite(m.weights[0])).toBe(true);
    expect(m.weights[0]).toBeGreaterThan(0);
    expect(rocAuc([-1, -2, 1, 2].map((v) => m.intercept + m.weights[0] * v), [0, 0, 1, 1])).toBe(1);
  });
  it("ignores a pure-noise feature (weight ≈ 0)", () => {
    const x = [[1, 5], [2, 5], [3, 5], [4, 5], [1, -5], [2, -5], [3, -5], [4, -5]];
    const y = [0, 0, 1, 1, 0, 0, 1, 1];
    const m = fitLogistic(x, y, { l2: 1e-3 });
    expect(Math.abs(m.weights[1])).toBeLessThan(1e-6);
  });
});

describe("helpers", () => {
  it("solveLinear solves a 2x2 system with pivoting", () => {
    const x = solveLinear([Float64Array.from([0, 1]), Float64Array.from([2, 0])], [3, 4]);
    expect([...x]).toEqual([2, 3]);
  });
  it("splitRows is deterministic, disjoint and complete", () => {
    const a = splitRows(10, 0.7, 42);
    expect(splitRows(10, 0.7, 42)).toEqual(a);
    expect(a.train.length).toBe(7);
    expect([...a.train, ...a.test].sort((p, q) => p - q)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(splitRows(10, 0.7, 43)).not.toEqual(a);
  });
  it("mulberry32 is reproducible and in [0, 1)", () => {
    const r1 = mulberry32(7);
    const r2 = mulberry32(7);
    for (let i = 0; i < 100; i++) {
      const v = r1();
      expect(v).toBe(r2());
      expect(v >= 0 && v < 1).toBe(true);
    }
  });
  it("lightFailsLabels: hard when the light model's score is below the cut, whatever the heavy one does", () => {
    expect([...lightFailsLabels([0.5, 0.01, 0.1, 0.02], 0.05)]).toEqual([0, 1, 0, 1]);
    expect([...lightFailsLabels([0.05], 0.05)]).toEqual([0]);
  });

  it("median and hardLabels: hard when the heavy model's gain is above the cut", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect([...hardLabels([0.5, 0.2, 0.1], [0.5, 0.6, 0.15], 0.05)]).toEqual([0, 1, 0]);
  });
  it("servedQuality serves the top share from the heavy model", () => {
    const router = [0.9, 0.1, 0.5, 0.3];
    const light = [0.1, 0.2, 0.3, 0.4];
    const heavy = [0.9, 0.9, 0.9, 0.9];
    expect(servedQuality(router, light, heavy, 0.25)).toBeCloseTo((0.9 + 0.2 + 0.3 + 0.4) / 4, 12);
    expect(servedQuality(router, light, heavy, 0)).toBeCloseTo(0.25, 12);
    expect(servedQuality(router, light, heavy, 1)).toBeCloseTo(0.9, 12);
  });
  it("agreement statistics", () => {
    expect(pearson([1, 2, 3], [2, 4, 6])).toBeCloseTo(1, 12);
    expect(Number.isNaN(pearson([1, 1, 1], [1, 2, 3]))).toBe(true);
    expect([...ranks([10, 20, 20, 5])]).toEqual([2, 3.5, 3.5, 1]);
    expect(spearman([1, 2, 3, 4], [1, 4, 9, 16])).toBeCloseTo(1, 12);
    expect(exactMatchRate([1, 2, 3, 4], [1, 2, 0, 4])).toBe(0.75);
  });
});
