/** What a starting resource manager makes of a stored plan: resumed, or set aside, saying why. */
import { describe, expect, it } from "vitest";
import { describeResume, staleBecause } from "../../services/resource-manager/resume.ts";
import type { Plan } from "../../contracts/messages.ts";

const stored = {
  v: 1,
  epoch: 12,
  policy: "hadis",
  issuedAtMs: 0,
  sloMs: 600,
  timeScale: 0.01,
  pair: { light: "a", heavy: "b" },
  routerThreshold: 0.2,
  discThreshold: 0.1,
  heavyShare: 0.3,
  models: { a: { workers: 1, batchSize: 1 }, b: { workers: 1, batchSize: 1 } },
  assignment: {},
  reason: "r",
} satisfies Plan;
const now = { timeScale: 0.01, sloMs: 600, policy: "hadis", models: ["a", "b", "c"] };

describe("staleBecause", () => {
  it("resumes a plan of the same time scale, SLO, policy and pool; names every difference otherwise", () => {
    expect(staleBecause(stored, now)).toBeNull();
    expect(staleBecause(stored, { ...now, timeScale: 0.1, sloMs: 6_000 })).toBe("epoch 12 was made for time scale 0.01, not 0.1");
    expect(staleBecause(stored, { ...now, sloMs: 900 })).toBe("epoch 12 was made for SLO 600 ms, not 900");
    expect(staleBecause(stored, { ...now, policy: "proteus", models: ["a"] })).toBe(
      "epoch 12 was made for policy hadis, not proteus; model b not in the pool",
    );
  });

  it("says it in one line", () => {
    expect(describeResume({ kind: "resumed", epoch: 12, policy: "hadis", timeScale: 0.01, demandQps: 3.14159 })).toBe(
      "resumed plan epoch 12 (policy hadis, time scale 0.01, demand estimate 3.14 qps)",
    );
    expect(describeResume({ kind: "fresh", storedEpoch: 12, why: "epoch 12 was made for time scale 0.01, not 0.1" })).toBe(
      "a fresh plan: the stored epoch 12 was made for time scale 0.01, not 0.1",
    );
    expect(describeResume({ kind: "none" })).toBeNull();
  });
});
