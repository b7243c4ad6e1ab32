import { beforeAll, describe, expect, it } from "vitest";
import type { Plan } from "../../contracts/messages.ts";
import { ProfileJudge } from "../../actors/judge/profile-judge.ts";
import { FixedPercentileThreshold, ReferenceFeatureScorer } from "../../actors/routing/difficulty.ts";
import { moveTarget, simulate, type SimConfig } from "../../actors/sim/simulator.ts";
import { fidLookupFromProfiles, scoreRun } from "../../actors/sim/scoring.ts";
import { formatTrace, traceFromHourly, ratePerSecond } from "../../actors/sim/trace.ts";
import { parseTrace } from "../../actors/profile/reference.ts";
import { createInlineHighsSolver, type HighsSolver } from "../../services/solver/highs-solver.ts";
import { loadProfiles } from "../../services/files/profiles.ts";

const profiles = loadProfiles();
const prompts = profiles.reference.prompts;

/** `n` arrivals evenly spaced at `qps`, prompts 0.. in order. */
const steady = (n: number, qps: number) =>
  Array.from({ length: n }, (_, i) => ({ atMs: Math.round((i * 1000) / qps), promptIdx: (i * 37) % prompts.length }));

describe("simulate", () => {
  let solver: HighsSolver;
  beforeAll(async () => {
    solver = await createInlineHighsSolver();
  });
  const config = (policyName: string, arrivals: SimConfig["arrivals"], workers: number, seed = 7): SimConfig => {
    const scorer = new ReferenceFeatureScorer(profiles);
    return {
      policyName,
      profiles,
      solve: (lp, o) => solver.solve(lp, o),
      scorer,
      threshold: new FixedPercentileThreshold(scorer.referenceScores),
      judge: new ProfileJudge(profiles, { latencyMs: 0, sleep: async () => undefined }),
      arrivals,
      prompts,
      workers,
      sloMs: 6_000,
      timeScale: 0.1,
      seed,
    };
  };
  const score = (policy: string, run: Awaited<ReturnType<typeof simulate>>) =>
    scoreRun({ policy, records: run.records, plans: run.plans, sloMs: 6_000, fid: fidLookupFromProfiles(profiles) });

  it("is deterministic: the same seed gives identical results, another seed other ones", async () => {
    const arrivals = steady(400, 20);
    const a = await simulate(config("hadis", arrivals, 4, 3));
    const b = await simulate(config("hadis", arrivals, 4, 3));
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
    expect(a.plans.length).toBeGreaterThan(0);
    expect(a.records).toHaveLength(400);
    // The seed names the requests, and Proteus's random split hashes the names.
    const p3 = await simulate(config("proteus", arrivals, 4, 3));
    const p4 = await simulate(config("proteus", arrivals, 4, 4));
    expect(JSON.stringify(p4.records)).not.toBe(JSON.stringify(p3.records));
  });

  it("on 2 workers at 8 qps, clipper-heavy violates far more than clipper-light", async () => {
    const arrivals = steady(80, 8);
    const light = score("clipper-light", await simulate(config("clipper-light", arrivals, 2)));
    const heavyRun = await simulate(config("clipper-heavy", arrivals, 2));
    const heavy = score("clipper-heavy", heavyRun);
    expect(light.sloViolationRatio).toBe(0);
    expect(light.fid).toBeCloseTo(25.23, 2);
    expect(heavy.sloViolationRatio).toBeGreaterThan(0.5);
    // Every request ended in the run (none left to the end-of-run fallback); a drop is a refusal at arrival.
    expect(heavyRun.unfinished).toBe(0);
    const dropped = heavyRun.records.filter((r) => r.outcome === "dropped");
    expect(dropped.length).toBeGreaterThan(40);
    expect(dropped.every((r) => r.latencyMs === 0)).toBe(true);
    // A served request takes at least its model's batch latency (130 ms for sd3.5-large-turbo at 0.1).
    expect(light.p50Ms).toBeGreaterThanOrEqual(130);
  });

  it("runs a cascade end to end: every request ends once, nearly all served at light load", async () => {
    const run = await simulate(config("hadis", steady(60, 2), 4));
    const s = score("hadis", run);
    expect(s.offered).toBe(60);
    // Each request ended once, in the run: `finish` refuses a second end, and none was left to the fallback.
    expect(run.unfinished).toBe(0);
    expect(s.dropped).toBe(0);
    // One request may time out behind a whole-pool swap (4 workers reloaded at once while it waits).
    expect(s.sloViolationRatio).toBeLessThanOrEqual(0.05);
    expect(Number.isFinite(s.fid)).toBe(true);
    const served = run.records.filter((r) => r.outcome === "served");
    expect(served.every((r) => r.servedModel !== undefined && r.servedScore !== undefined && r.latencyMs! <= 6_000)).toBe(true);
  });

  it("moves stranded work to the model now playing its stage (the live router's rule)", () => {
    const plan = (models: Plan["models"], pair: Plan["pair"]) => ({ models, pair }) as Plan;
    const cases: [Plan, "light" | "heavy", string][] = [
      [plan({ a: { workers: 0, batchSize: 1 }, b: { workers: 2, batchSize: 1 } }, { light: "b", heavy: "c" }), "light", "a"],
      [plan({ a: { workers: 1, batchSize: 1 } }, { light: "a", heavy: "a" }), "heavy", "a"],
      [plan({ c: { workers: 3, batchSize: 1 } }, { light: "c", heavy: "c" }), "heavy", "b"],
      [plan({ c: { workers: 0, batchSize: 1 } }, { light: "c", heavy: "c" }), "light", "b"],
    ];
    // Hand-worked: a → b (b plays light and has workers); a keeps its worker; b → c; c has none.
    expect(cases.map(([p, stage, model]) => moveTarget(p, stage, model))).toEqual(["b", null, "c", null]);
  });
});

describe("traceFromHourly", () => {
  it("scales the shape to the QPS range and is seeded", () => {
    const hourly = [10, 20, 30, 20, 10];
    expect(ratePerSecond(hourly, { minQps: 2, maxQps: 32, seconds: 5 })).toEqual([2, 17, 32, 17, 2]);
    const a = traceFromHourly(hourly, { minQps: 2, maxQps: 32, seconds: 50, seed: 1, promptCount: 5000 });
    const b = traceFromHourly(hourly, { minQps: 2, maxQps: 32, seconds: 50, seed: 1, promptCount: 5000 });
    expect(b).toEqual(a);
    const expected = ratePerSecond(hourly, { minQps: 2, maxQps: 32, seconds: 50 }).reduce((x, y) => x + y, 0);
    expect(Math.abs(a.length - expected)).toBeLessThan(4 * Math.sqrt(expected));
    expect(a.every((x, i) => i === 0 || x.atMs >= a[i - 1].atMs)).toBe(true);
    expect(parseTrace(formatTrace(a))).toEqual(a);
  });
});
