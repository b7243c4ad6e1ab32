/** Logistic regression, ROC AUC, splitting, k folds, labels, L2 selection and the served-quality measures on tiny hand-made data. */
import { describe, expect, it } from "vitest";
import { exactMatchRate, pearson, ranks, spearman } from "../../../actors/analyzer/agreement.ts";
import {
  aboveLabels,
  cascadeServed,
  correctedSe,
  fitLogistic,
  hardLabels,
  kFolds,
  lightFailsLabels,
  linearScore,
  logitGapT,
  logOdds,
  median,
  mulberry32,
  rocAuc,
  selectL2,
  servedQuality,
  solveLinear,
  splitRows,
  summarise,
} from "../../../actors/analyzer/calibration.ts";
import { parseDiscriminatorImageScores } from "../../../actors/profile/reference.ts";

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
    expect(
      rocAuc(
        [-1, -2, 1, 2].map((v) => m.intercept + m.weights[0] * v),
        [0, 0, 1, 1],
      ),
    ).toBe(1);
  });
  it("ignores a pure-noise feature (weight ≈ 0)", () => {
    const x = [
      [1, 5],
      [2, 5],
      [3, 5],
      [4, 5],
      [1, -5],
      [2, -5],
      [3, -5],
      [4, -5],
    ];
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

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

describe("logit-gap label", () => {
  it("logOdds clamps 0 and 1 to finite values", () => {
    expect(logOdds(0.5)).toBe(0);
    expect(logOdds(sigmoid(2))).toBeCloseTo(2, 12);
    expect(logOdds(0)).toBeCloseTo(Math.log(1e-9 / (1 - 1e-9)), 9);
    expect(Number.isFinite(logOdds(1))).toBe(true);
  });
  it("logitGapT is Welch's t of the 4 images' log-odds, prompt by prompt", () => {
    // Prompt 0: light log-odds 0,0,0,0; heavy 1,2,3,2 → mean gap 2, s²_h = 2/3, s²_l = 0 → t = 2/√(2/3/4) = 2√6.
    // Prompt 1: the same with the models swapped → −2√6.
    const heavyLogits = [1, 2, 3, 2];
    const light = [0.5, 0.5, 0.5, 0.5, ...heavyLogits.map(sigmoid)];
    const heavy = [...heavyLogits.map(sigmoid), 0.5, 0.5, 0.5, 0.5];
    const t = logitGapT(light, heavy, 4);
    expect(t.length).toBe(2);
    expect(t[0]).toBeCloseTo(2 * Math.sqrt(6), 4);
    expect(t[1]).toBeCloseTo(-2 * Math.sqrt(6), 4);
  });
  it("ranks a consistent gain above one lucky image, unlike the raw P(real) gap", () => {
    // A: heavy quadruples P(real) on every image; B: one heavy image at 0.9, the other three as light.
    const light = [0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001];
    const heavy = [0.004, 0.003, 0.005, 0.004, 0.9, 0.001, 0.001, 0.001];
    const t = logitGapT(light, heavy, 4);
    expect(t[0]).toBeGreaterThan(10); // consistent: many standard errors
    // B: one image gains d, three gain 0 → mean d/4, s² = d²/4, SE = √(s²/4) = d/4: t = 1 whatever d is.
    expect(t[1]).toBeCloseTo(1, 4);
    const rawGain = [0, 1].map(
      (i) => (heavy.slice(4 * i, 4 * i + 4).reduce((s, x) => s + x, 0) - light.slice(4 * i, 4 * i + 4).reduce((s, x) => s + x, 0)) / 4,
    );
    expect(rawGain[1]).toBeGreaterThan(rawGain[0]);
    expect([...aboveLabels(t, 5)]).toEqual([1, 0]);
    expect([...hardLabels([0.001, 0.001], [0.004, 0.22575], 0.05)]).toEqual([0, 1]);
  });
  it("rejects rows that are not whole prompts", () => {
    expect(() => logitGapT([0.1, 0.2, 0.3], [0.1, 0.2, 0.3], 4)).toThrow();
    expect(() => logitGapT([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], 4)).toThrow();
  });
  it("parseDiscriminatorImageScores keeps every image's P(real) in file order", () => {
    expect([...parseDiscriminatorImageScores("0.9 0.1\n0.25 0.75\n\n")]).toEqual([0.1, 0.75]);
    expect(() => parseDiscriminatorImageScores("0.9\n")).toThrow(/row 1/);
  });
});

describe("k folds and L2 selection", () => {
  it("kFolds is deterministic, disjoint, complete and balanced", () => {
    const f = kFolds(11, 3, 5);
    expect(kFolds(11, 3, 5)).toEqual(f);
    expect(f.map((x) => x.length).sort()).toEqual([3, 4, 4]);
    expect(f.flat().sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(
      kFolds([10, 20, 30, 40], 2, 1)
        .flat()
        .sort((a, b) => a - b),
    ).toEqual([10, 20, 30, 40]);
  });

  /** Planted signal: hard when 0.8·x0 − 0.5·x1 + noise is above its median; x2 is pure noise. */
  function planted(n: number, seed: number) {
    const rand = mulberry32(seed);
    const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
    const x = Array.from({ length: n }, () => Float64Array.from([gauss(), gauss(), gauss()]));
    const t = x.map((v) => 0.8 * v[0] - 0.5 * v[1] + gauss());
    return { x, y: aboveLabels(t, median(t)) };
  }
  it("selectL2 + fitLogistic recover the planted direction; held-out AUC matches the true weights'", () => {
    const { x, y } = planted(2000, 3);
    const train = Array.from({ length: 1400 }, (_, i) => i);
    const test = Array.from({ length: 600 }, (_, i) => 1400 + i);
    const grid = [1e-4, 1e-2, 1, 100];
    const { l2, cvAuc } = selectL2(x, y, train, grid, 5, 9);
    expect(selectL2(x, y, train, grid, 5, 9)).toEqual({ l2, cvAuc });
    expect(cvAuc).toBeGreaterThan(0.7);
    const m = fitLogistic(
      train.map((i) => x[i]),
      train.map((i) => y[i]),
      { l2 },
    );
    expect(m.weights[0]).toBeGreaterThan(0);
    expect(m.weights[1]).toBeLessThan(0);
    expect(Math.abs(m.weights[2])).toBeLessThan(0.3 * Math.abs(m.weights[1]));
    const truth = rocAuc(
      test.map((i) => 0.8 * x[i][0] - 0.5 * x[i][1]),
      test.map((i) => y[i]),
    );
    const learned = rocAuc(
      test.map((i) => linearScore(m, x[i])),
      test.map((i) => y[i]),
    );
    expect(truth).toBeGreaterThan(0.75);
    expect(Math.abs(learned - truth)).toBeLessThan(0.02);
    // A wrong direction (the reference router's situation) is near chance.
    expect(
      Math.abs(
        rocAuc(
          test.map((i) => x[i][2]),
          test.map((i) => y[i]),
        ) - 0.5,
      ),
    ).toBeLessThan(0.07);
  });
});

describe("cascade and fold statistics", () => {
  const router = [0.9, 0.1, 0.5, 0.3];
  const light = [0.1, 0.2, 0.3, 0.4];
  const heavy = [0.9, 0.9, 0.9, 0.9];
  it("routes the top share to heavy, escalates light scores below the threshold, counts wasted light passes", () => {
    // Prompt 0 routed; prompt 1 runs light (0.2 < 0.25) and is escalated; 2 and 3 are served light.
    const c = cascadeServed(router, light, light, heavy, 0.25, 0.25);
    expect(c.meanServed).toBeCloseTo((0.9 + 0.9 + 0.3 + 0.4) / 4, 12);
    expect(c.heavyShare).toBeCloseTo(0.5, 12);
    expect(c.wastedLight).toBeCloseTo(0.25, 12);
    // The router-only proxy is the cascade with no escalation.
    expect(cascadeServed(router, light, light, heavy, 0.25, -Infinity).meanServed).toBeCloseTo(
      servedQuality(router, light, heavy, 0.25),
      12,
    );
  });
  it("gives the expectation for a random router", () => {
    // Each prompt goes heavy with probability 0.25; prompts 0 and 1 are escalated whenever they run light.
    const c = cascadeServed(null, light, light, heavy, 0.25, 0.25);
    expect(c.meanServed).toBeCloseTo((0.9 + 0.9 + (0.25 * 0.9 + 0.75 * 0.3) + (0.25 * 0.9 + 0.75 * 0.4)) / 4, 12);
    expect(c.heavyShare).toBeCloseTo((1 + 1 + 0.25 + 0.25) / 4, 12);
    expect(c.wastedLight).toBeCloseTo((0.75 + 0.75) / 4, 12);
  });
  it("escalates on the light score but serves the given quality (e.g. log-odds)", () => {
    const lq = light.map((p) => logOdds(p));
    const hq = heavy.map((p) => logOdds(p));
    const c = cascadeServed(router, light, lq, hq, 0.25, 0.25);
    expect(c.meanServed).toBeCloseTo((hq[0] + hq[1] + lq[2] + lq[3]) / 4, 12);
  });
  it("summarise and the Nadeau–Bengio corrected standard error", () => {
    const s = summarise([1, 2, 3, 4, 5]);
    expect(s.mean).toBe(3);
    expect(s.sd).toBeCloseTo(Math.sqrt(2.5), 12);
    expect(s.se).toBeCloseTo(Math.sqrt(2.5) / Math.sqrt(5), 12);
    // J = 5 estimates from 5-fold CV: sd · √(1/5 + 1/4).
    expect(correctedSe([1, 2, 3, 4, 5], 5)).toBeCloseTo(Math.sqrt(2.5) * Math.sqrt(0.2 + 0.25), 12);
  });
});
