/** SlidingPercentileThreshold: top-share classification, reference fallback, eviction, edges. */
import { describe, expect, it } from "vitest";
import { SlidingPercentileThreshold } from "../../../actors/analyzer/threshold.ts";

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("SlidingPercentileThreshold", () => {
  it("uses the reference distribution until minSamples scores are in", () => {
    const t = new SlidingPercentileThreshold({ capacity: 10, minSamples: 5, reference: range(1, 100) });
    expect(t.warm).toBe(false);
    expect(t.isHard(95, 0.1)).toBe(true); // 5 reference scores above 95 < 10
    expect(t.isHard(85, 0.1)).toBe(false); // 15 above
    for (const s of [0, 0, 0, 0]) t.observe(s);
    expect(t.warm).toBe(false);
    expect(t.isHard(95, 0.1)).toBe(true);
    t.observe(0);
    expect(t.warm).toBe(true);
    expect(t.isHard(1, 0.3, 0.99)).toBe(true); // above every windowed score: first of the 1.5 hard places
    // Five scores tie at 0 for the 2.5 hard places: the tie-break decides, half of draws hard.
    expect(t.isHard(0, 0.5, 0.4)).toBe(true);
    expect(t.isHard(0, 0.5, 0.6)).toBe(false);
  });

  it("marks the top share of the window hard", () => {
    const t = new SlidingPercentileThreshold({ capacity: 100, minSamples: 100, reference: [] });
    for (const s of range(1, 100)) t.observe(s);
    const hard = range(1, 100).filter((s) => t.isHard(s, 0.1));
    expect(hard).toEqual(range(91, 100));
    expect(range(1, 100).filter((s) => t.isHard(s, 0.25)).length).toBe(25);
    expect(t.threshold(0.1)).toBeCloseTo(90.1, 6);
  });

  it("a score repeated through the window goes hard at the share, not all one way", () => {
    const draws = range(0, 999).map((i) => i / 1000);
    const share = (t: SlidingPercentileThreshold, score: number, routerShare: number) =>
      draws.filter((u) => t.isHard(score, routerShare, u)).length / draws.length;
    const same = new SlidingPercentileThreshold({ capacity: 200, minSamples: 200, reference: [] });
    for (let i = 0; i < 200; i++) same.observe(1);
    expect(share(same, 1, 0.1)).toBeCloseTo(0.1, 6);
    // Half the window at 2, half at 1, 30% hard: the 2s take it all, 60% of them each.
    const two = new SlidingPercentileThreshold({ capacity: 100, minSamples: 100, reference: [] });
    for (let i = 0; i < 50; i++) [1, 2].forEach((s) => two.observe(s));
    expect(share(two, 2, 0.3)).toBeCloseTo(0.6, 6);
    expect(share(two, 1, 0.3)).toBe(0);
  });

  it("share·n a rounding error above a whole number admits no extra score", () => {
    const t = new SlidingPercentileThreshold({ capacity: 100, minSamples: 100, reference: [] });
    for (const s of range(1, 100)) t.observe(s);
    for (const share of [0.07, 0.14, 0.28, 0.29, 0.57]) {
      expect(range(1, 100).filter((s) => t.isHard(s, share)).length, `share ${share}`).toBe(Math.round(share * 100));
    }
  });

  it("routerShare 0 is never hard and 1 always hard", () => {
    const t = new SlidingPercentileThreshold({ capacity: 4, minSamples: 1, reference: [] });
    t.observe(5);
    expect(t.isHard(1e9, 0)).toBe(false);
    expect(t.isHard(-1e9, 1)).toBe(true);
    expect(t.isHard(3, -0.5)).toBe(false);
    expect(t.isHard(3, 1.5)).toBe(true);
  });

  it("evicts the oldest score when full", () => {
    const t = new SlidingPercentileThreshold({ capacity: 3, minSamples: 3, reference: [] });
    for (const s of [100, 1, 2]) t.observe(s);
    expect(t.isHard(50, 1 / 3)).toBe(false); // 100 is above
    t.observe(3); // evicts 100 → window 1, 2, 3
    expect(t.size).toBe(3);
    expect(t.isHard(50, 1 / 3)).toBe(true);
    expect(t.isHard(2.5, 1 / 3)).toBe(false);
    expect(t.isHard(3, 1 / 3)).toBe(true);
  });

  it("keeps duplicates straight through eviction", () => {
    const t = new SlidingPercentileThreshold({ capacity: 2, minSamples: 2, reference: [] });
    for (const s of [7, 7, 7, 1]) t.observe(s);
    expect(t.threshold(0)).toBe(7); // window 7, 1
    expect(t.threshold(1)).toBe(1);
  });

  it("ignores non-finite scores and rejects a bad capacity", () => {
    const t = new SlidingPercentileThreshold({ capacity: 2, reference: [Number.NaN, 1] });
    t.observe(Number.NaN);
    t.observe(Number.POSITIVE_INFINITY);
    expect(t.size).toBe(0);
    expect(t.isHard(Number.NaN, 0.5)).toBe(false);
    expect(() => new SlidingPercentileThreshold({ capacity: 0, reference: [] })).toThrow();
  });

  it("with an empty reference and a cold window nothing is hard below share 1", () => {
    const t = new SlidingPercentileThreshold({ capacity: 10, reference: [] });
    expect(t.isHard(1, 0.5)).toBe(false);
    expect(Number.isNaN(t.threshold(0.5))).toBe(true);
  });
});
