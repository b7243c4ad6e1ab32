import { describe, expect, it } from "vitest";
import type { Plan } from "../../../contracts/messages.ts";
import { dampPlan, planShortfall } from "../../../actors/planner/damping.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

const profiles = loadProfiles();
const ids = Array.from({ length: 16 }, (_, i) => `w${i}`);

function plan(over: Partial<Plan> & { split: [string, number][] }): Plan {
  const assignment: Record<string, string> = {};
  let i = 0;
  for (const [m, n] of over.split) for (let k = 0; k < n; k++) assignment[ids[i++]] = m;
  const models = Object.fromEntries(over.split.map(([m, n]) => [m, { workers: n, batchSize: 1 }]));
  const { split: _split, ...rest } = over;
  return {
    v: 1,
    epoch: 1,
    policy: "hadis",
    issuedAtMs: 0,
    sloMs: 6000,
    timeScale: 0.1,
    pair: { light: over.split[0][0], heavy: over.split[over.split.length - 1][0] },
    routerThreshold: 0.2,
    discThreshold: 0,
    heavyShare: 0.2,
    expectedFid: 20,
    models,
    assignment,
    reason: "test",
    degraded: 0,
    ...rest,
  };
}

const current = plan({
  split: [
    ["sd35-medium", 8],
    ["sd35-large", 8],
  ],
  expectedFid: 19.77,
});
const moveTwo = (fid: number) =>
  plan({
    split: [
      ["sd35-medium", 6],
      ["sd35-large", 10],
    ],
    routerThreshold: 0.5,
    heavyShare: 0.5,
    expectedFid: fid,
  });

describe("dampPlan", () => {
  it("adopts the first plan and plans that move nobody", () => {
    expect(dampPlan({ current: null, candidate: current, lastSwapAtMs: {}, nowMs: 0, demandQps: 1, profiles }).adopt).toBe(true);
    const same = { ...current, routerThreshold: 0.3, expectedFid: 19.9 };
    const v = dampPlan({ current, candidate: same, lastSwapAtMs: {}, nowMs: 0, demandQps: 1, profiles });
    expect(v).toMatchObject({ adopt: true, swaps: 0 });
  });

  it("holds a worth-it change while a moved worker is within its dwell time", () => {
    const candidate = moveTwo(19.3);
    const lastSwapAtMs = { w6: 10_000, w7: 10_000 };
    const held = dampPlan({ current, candidate, lastSwapAtMs, nowMs: 12_000, demandQps: 1, profiles });
    expect(held.adopt).toBe(false);
    expect(held.dwelling).toEqual(["w6", "w7"]);
    const later = dampPlan({ current, candidate, lastSwapAtMs, nowMs: 10_000 + 12_001, demandQps: 1, profiles });
    expect(later.adopt).toBe(true);
    expect(later.swaps).toBe(2);
  });

  it("adopts a change only when the FID gain pays for the swaps", () => {
    const small = dampPlan({ current, candidate: moveTwo(19.76), lastSwapAtMs: {}, nowMs: 0, demandQps: 1, profiles });
    expect(small.adopt).toBe(false);
    expect(small.requiredGain).toBeGreaterThan(0.01);
    const big = dampPlan({ current, candidate: moveTwo(19.3), lastSwapAtMs: {}, nowMs: 0, demandQps: 1, profiles });
    expect(big.adopt).toBe(true);
    // A worse plan is never worth a swap.
    expect(dampPlan({ current, candidate: moveTwo(21), lastSwapAtMs: {}, nowMs: 0, demandQps: 1, profiles }).adopt).toBe(false);
  });

  it("adopts another policy's plan at once, and a rule-driven policy's step past dwell whatever its FID", () => {
    const other = { ...moveTwo(25.2), policy: "clipper-light" };
    expect(dampPlan({ current, candidate: other, lastSwapAtMs: {}, nowMs: 0, demandQps: 1, profiles })).toMatchObject({
      adopt: true,
      reason: expect.stringMatching(/policy changed/),
    });
    // INFaaS-Acc stepping down to a less accurate variant under queue pressure (the current plan still has capacity).
    const infaas = { ...current, policy: "infaas-acc" };
    const down = { ...moveTwo(21), policy: "infaas-acc" };
    expect(dampPlan({ current: infaas, candidate: down, lastSwapAtMs: {}, nowMs: 0, demandQps: 1, profiles }).adopt).toBe(true);
    expect(dampPlan({ current: infaas, candidate: down, lastSwapAtMs: { w6: 0 }, nowMs: 1_000, demandQps: 1, profiles }).adopt).toBe(false);
  });

  it("always adopts when the current plan falls short, even within dwell", () => {
    // 8 medium + 8 large cannot carry 30 qps.
    expect(planShortfall(current, 30, profiles)).toMatch(/capacity/);
    const lighter = plan({
      split: [
        ["sd35-large-turbo", 4],
        ["sd35-medium", 12],
      ],
      expectedFid: 22.5,
    });
    const v = dampPlan({
      current,
      candidate: lighter,
      lastSwapAtMs: Object.fromEntries(ids.map((id) => [id, 0])),
      nowMs: 1,
      demandQps: 30,
      profiles,
    });
    expect(v.adopt).toBe(true);
    expect(v.reason).toMatch(/falls short/);
  });

  it("holds a plan that falls short only by its queues while the workers it would move dwell, and replaces it once they have", () => {
    // Enough capacity for 1 qps, but a backlog on the heavy model puts the slowest path over the SLO.
    const backlog = { "sd35-large": 5_000 };
    expect(planShortfall(current, 1, profiles)).toBeNull();
    expect(planShortfall(current, 1, profiles, backlog)).toMatch(/slowest path/);
    const candidate = moveTwo(19.3);
    const dwelling = { w6: 10_000, w7: 10_000 };
    const held = dampPlan({ current, candidate, lastSwapAtMs: dwelling, nowMs: 12_000, demandQps: 1, queueDelayMs: backlog, profiles });
    expect(held).toMatchObject({ adopt: false, dwelling: ["w6", "w7"] });
    expect(held.reason).toMatch(/falls short only by its queues: slowest path/);
    // Past the dwell, the shortfall replaces it whatever the FID gain.
    const later = dampPlan({
      current,
      candidate: moveTwo(19.9),
      lastSwapAtMs: dwelling,
      nowMs: 22_001,
      demandQps: 1,
      queueDelayMs: backlog,
      profiles,
    });
    expect(later).toMatchObject({ adopt: true, reason: expect.stringMatching(/falls short/) });
    // A capacity shortfall overrides the dwell (the previous test): the backlog would only grow.
  });

  it("always leaves a degraded plan for a feasible one", () => {
    const degraded = plan({ split: [["sdxl-lightning", 16]], expectedFid: 29.75, degraded: 1, routerThreshold: 0, heavyShare: 0 });
    const v = dampPlan({
      current: degraded,
      candidate: moveTwo(19.3),
      lastSwapAtMs: Object.fromEntries(ids.map((id) => [id, 0])),
      nowMs: 1,
      demandQps: 1,
      profiles,
    });
    expect(v.adopt).toBe(true);
  });

  it("flags a slowest path over the SLO as a shortfall", () => {
    const slow = plan({
      split: [
        ["sd35-medium", 8],
        ["sd35-large", 8],
      ],
      discThreshold: 0.5,
      heavyShare: 0.6,
    });
    expect(planShortfall(slow, 0.5, profiles, { "sd35-large": 3000 })).toMatch(/slowest path/);
    expect(planShortfall(slow, 0.5, profiles)).toBeNull();
  });
});
