import { describe, expect, it } from "vitest";
import { byDeadline, fitBatch, fittingBatchSize } from "../../../actors/worker/deadline-batch.ts";

/** A batch of n takes 0.9 × n × 1,000 ms past the first (the profiles' batch model): 1,000, 1,800, 2,700, … */
const expectedMs = (n: number) => (n === 1 ? 1_000 : 900 * n);

describe("fittingBatchSize (hadis-plus's batch rule at the worker)", () => {
  it("keeps the whole batch when every deadline fits it", () => {
    expect(fittingBatchSize([5_000, 6_000, 7_000], 0, expectedMs)).toBe(3);
  });

  it("shrinks to what the tightest deadline allows: alone in time, late in the full batch", () => {
    // 1,500 ms left: a batch of 1 ends at 1,000, of 2 at 1,800.
    expect(fittingBatchSize([1_500, 9_000], 0, expectedMs)).toBe(1);
    // 2,000 ms left: two fit (1,800), three do not (2,700).
    expect(fittingBatchSize([2_000, 9_000, 9_000], 0, expectedMs)).toBe(2);
  });

  it("an item late even alone does not shrink the batch (nothing here saves it)", () => {
    expect(fittingBatchSize([900, 9_000, 9_000], 0, expectedMs)).toBe(3);
  });

  it("counts from now", () => {
    expect(fittingBatchSize([11_500, 19_000], 10_000, expectedMs)).toBe(1);
    expect(fittingBatchSize([11_900, 19_000], 10_000, expectedMs)).toBe(2);
  });

  it("one item or none", () => {
    expect(fittingBatchSize([100], 0, expectedMs)).toBe(1);
    expect(fittingBatchSize([], 0, expectedMs)).toBe(0);
  });
});

describe("byDeadline", () => {
  it("orders tightest deadline first and keeps queue order among equals", () => {
    const items = [
      { id: "a", d: 3 },
      { id: "b", d: 1 },
      { id: "c", d: 3 },
      { id: "d", d: 2 },
    ];
    expect(byDeadline(items, (x) => x.d).map((x) => x.id)).toEqual(["b", "d", "a", "c"]);
    expect(items.map((x) => x.id)).toEqual(["a", "b", "c", "d"]); // not mutated
  });
});

describe("fitBatch", () => {
  const items = [
    { id: "loose", d: 9_000 },
    { id: "tight", d: 1_500 },
    { id: "last", d: 8_000 },
  ];
  it("runs the tight item first and alone, and gives the others back", () => {
    const { run, back } = fitBatch(items, (x) => x.d, 0, expectedMs);
    expect(run.map((x) => x.id)).toEqual(["tight"]);
    expect(back.map((x) => x.id)).toEqual(["last", "loose"]);
  });
  it("runs an item that must stay whatever the rule says", () => {
    const { run, back } = fitBatch(items, (x) => x.d, 0, expectedMs, [items[2]]);
    expect(run.map((x) => x.id)).toEqual(["tight", "last"]);
    expect(back.map((x) => x.id)).toEqual(["loose"]);
  });
});
