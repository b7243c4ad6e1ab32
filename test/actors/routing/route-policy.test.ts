/** decideRoute: the router's share holds per request, whatever the prompt mix. */
import { describe, expect, it } from "vitest";
import { decideRoute } from "../../../actors/routing/route-policy.ts";
import { FixedPercentileThreshold } from "../../../actors/routing/difficulty.ts";
import { PROTOCOL_VERSION, type Plan } from "../../../contracts/messages.ts";

const plan = (routerThreshold: number, pair = { light: "l", heavy: "h" }): Plan => ({
  v: PROTOCOL_VERSION,
  epoch: 1,
  policy: "test",
  issuedAtMs: 0,
  sloMs: 1_000,
  timeScale: 1,
  pair,
  routerThreshold,
  discThreshold: 0.2,
  heavyShare: routerThreshold,
  models: {},
  assignment: {},
  reason: "test",
});

const ids = Array.from({ length: 4_000 }, (_, i) => `req-${i}`);
const hardShare = (p: Plan, scores: (i: number) => number, threshold: FixedPercentileThreshold) =>
  ids.filter((id, i) => decideRoute(p, "a cat", id, { score: () => scores(i) }, threshold).hard).length / ids.length;

describe("decideRoute", () => {
  it("sends the planned share of one repeated prompt to the heavy model, not all or none", () => {
    // Every reference prompt scores alike (a feature-poor mix): all tie at the cut.
    const threshold = new FixedPercentileThreshold(new Array(500).fill(1));
    expect(hardShare(plan(0.2), () => 1, threshold)).toBeCloseTo(0.2, 1);
    expect(hardShare(plan(0.6), () => 1, threshold)).toBeCloseTo(0.6, 1);
  });

  it("routes a request the same way every time (a retry keeps its route)", () => {
    const threshold = new FixedPercentileThreshold(new Array(500).fill(1));
    const first = ids.map((id) => decideRoute(plan(0.5), "a cat", id, { score: () => 1 }, threshold).hard);
    expect(ids.map((id) => decideRoute(plan(0.5), "a cat", id, { score: () => 1 }, threshold).hard)).toEqual(first);
  });

  it("keeps the hardest scores hard and never escalates a single-model pair", () => {
    const threshold = new FixedPercentileThreshold(Array.from({ length: 100 }, (_, i) => i));
    expect(hardShare(plan(0.2), () => 95, threshold)).toBe(1);
    expect(hardShare(plan(0.2), () => 10, threshold)).toBe(0);
    expect(hardShare(plan(0.9, { light: "h", heavy: "h" }), () => 95, threshold)).toBe(0);
  });

  it("consecutive request ids draw independently: the random split does not come in bursts", () => {
    // The simulator's ids are a seed and a counter; live ids are time-ordered. Blocks of 80 (a
    // tick's arrivals at peak) should scatter around the share as independent draws would.
    const random = { ...plan(0.3), routerMode: "random" as const };
    const threshold = new FixedPercentileThreshold([0]);
    const shares: number[] = [];
    for (let block = 0; block < 100; block++) {
      let hard = 0;
      for (let i = 0; i < 80; i++) if (decideRoute(random, "a cat", `1-${block * 80 + i}`, { score: () => 0 }, threshold).hard) hard++;
      shares.push(hard / 80);
    }
    const mean = shares.reduce((a, b) => a + b, 0) / shares.length;
    const sd = Math.sqrt(shares.reduce((a, b) => a + (b - mean) ** 2, 0) / shares.length);
    expect(mean).toBeCloseTo(0.3, 1);
    // Independent draws: sqrt(0.3 · 0.7 / 80) = 0.051; FNV-1a alone gave 0.23.
    expect(sd).toBeLessThan(0.08);
  });
});
