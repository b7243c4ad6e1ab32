import { describe, expect, it } from "vitest";
import { runSplitting } from "../../../actors/worker/bisect.ts";

/** Items are numbers; an attempt fails when `fails` says so of the items it got. */
const attemptWith = (fails: (items: readonly number[]) => boolean, seen: number[][] = []) => async (items: readonly number[]) => {
  seen.push([...items]);
  return fails(items) ? { ok: false as const, error: new Error(`failed ${items.join(",")}`) } : { ok: true as const, results: items.map((i) => i * 10) };
};

describe("runSplitting", () => {
  it("runs a batch that works once, whole", async () => {
    const run = await runSplitting([1, 2, 3], attemptWith(() => false));
    expect(run).toEqual({ outcomes: [1, 2, 3].map((i) => ({ ok: true, result: i * 10 })), runs: 1, whole: true });
  });

  it("isolates one bad item in halving steps, serving the rest in order", async () => {
    const seen: number[][] = [];
    const run = await runSplitting([1, 2, 3, 4, 5, 6, 7, 8], attemptWith((items) => items.includes(6), seen));
    expect(seen).toEqual([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4], [5, 6, 7, 8], [5, 6], [7, 8], [5], [6]]);
    expect(run.outcomes.map((o) => (o.ok ? o.result : "x"))).toEqual([10, 20, 30, 40, 50, "x", 70, 80]);
    expect([run.runs, run.whole]).toEqual([7, false]);
  });

  it("fails the whole batch when both its halves fail (the model, not an item), after three runs", async () => {
    const seen: number[][] = [];
    const run = await runSplitting([1, 2, 3, 4, 5], attemptWith(() => true, seen));
    expect(seen).toEqual([[1, 2, 3, 4, 5], [1, 2, 3], [4, 5]]);
    expect(run.outcomes.every((o) => !o.ok)).toBe(true);
    expect(run.runs).toBe(3);
  });

  it("runs a batch too big in its halves when they fit", async () => {
    const run = await runSplitting([1, 2, 3, 4], attemptWith((items) => items.length > 2));
    expect(run.outcomes.map((o) => o.ok)).toEqual([true, true, true, true]);
    expect([run.runs, run.whole]).toEqual([3, false]);
  });
});
