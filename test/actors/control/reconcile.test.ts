import { describe, expect, it } from "vitest";
import { assignWorkers, countSwaps, nextPlan } from "../../../actors/control/reconcile.ts";
import { staticDecision, heavyShareOf } from "../../../actors/control/static-policy.ts";
import { WorkerInventory } from "../../../actors/control/inventory.ts";
import type { ModelProfile } from "../../../contracts/profile.ts";

const ids = ["w0", "w1", "w2", "w3", "w4"];

describe("assignWorkers", () => {
  it("keeps workers on their model while it still needs them and moves the fewest", () => {
    const current = { w0: "a", w1: "a", w2: "a", w3: "b", w4: "b" };
    const next = assignWorkers(ids, current, { a: 2, b: 3 });
    expect(Object.values(next).filter((m) => m === "a")).toHaveLength(2);
    expect(Object.values(next).filter((m) => m === "b")).toHaveLength(3);
    expect(countSwaps(current, next)).toBe(1);
    expect(next.w3).toBe("b");
    expect(next.w4).toBe("b");
  });

  it("fills unassigned workers first and leaves extras unassigned", () => {
    const next = assignWorkers(ids, { w0: "a" }, { a: 1, b: 2 });
    expect(next.w0).toBe("a");
    expect(Object.keys(next)).toHaveLength(3);
  });

  it("assigns as many as exist when counts exceed the workers", () => {
    const next = assignWorkers(["w0"], {}, { a: 3 });
    expect(next).toEqual({ w0: "a" });
  });
});

describe("nextPlan", () => {
  const decision = { pair: { light: "a", heavy: "b" }, routerThreshold: 0.2, discThreshold: 0.1, heavyShare: 0.28, models: { a: { workers: 1, batchSize: 2 }, b: { workers: 1, batchSize: 1 } }, reason: "r", degraded: 0 };
  const base = { decision, assignment: { w0: "a", w1: "b" }, policy: "static", sloMs: 6000, timeScale: 0.1, nowMs: 10 };
  it("issues epoch 1 first, nothing when unchanged, and epoch+1 on a change", () => {
    const first = nextPlan({ ...base, current: null })!;
    expect(first.epoch).toBe(1);
    expect(nextPlan({ ...base, current: first, nowMs: 20 })).toBeNull();
    const moved = nextPlan({ ...base, current: first, assignment: { w0: "b", w1: "b" } })!;
    expect(moved.epoch).toBe(2);
  });
});

describe("staticDecision", () => {
  const profile = (name: string, ms: number): ModelProfile => ({ name, latencyMsByBatch: { "1": ms }, loadMs: 0, unloadMs: 0 });
  const profiles = new Map([["a", profile("a", 100)], ["b", profile("b", 1000)]]);
  it("splits workers by the GPU time each model needs", () => {
    const d = staticDecision({ light: "a", heavy: "b", routerThreshold: 0.2, discThreshold: 0.2, lightBatchSize: 1, heavyBatchSize: 1 }, profiles, 10);
    // light 0.8 × 100 = 80, heavy 0.36 × 1000 = 360 → light ≈ 10 × 80/440 = 1.8 → 2
    expect(d.models).toEqual({ a: { workers: 2, batchSize: 1 }, b: { workers: 8, batchSize: 1 } });
    expect(d.heavyShare).toBeCloseTo(heavyShareOf(0.2, 0.2));
    expect(heavyShareOf(0.2, 0.2)).toBeCloseTo(0.36);
  });
});

describe("WorkerInventory", () => {
  const beat = (id: string, state: "serving" | "draining" = "serving") => ({ v: 1 as const, workerId: id, backend: "profile", model: "a", state, batchSize: 1, inFlight: 0, servedTotal: 0, swapsTotal: 0, planEpoch: 1, sentAtMs: 0 });
  it("forgets workers silent too long and those that say they leave", () => {
    const inv = new WorkerInventory();
    inv.observe(beat("w1"), 0);
    inv.observe(beat("w2"), 900);
    expect(inv.live(1000, 500).map((w) => w.id)).toEqual(["w2"]);
    inv.observe(beat("w2", "draining"), 1000);
    expect(inv.live(1000, 500)).toEqual([]);
  });
});
