import { describe, expect, it } from "vitest";
import { assignWorkers, countByModel, countSwaps } from "../../../actors/planner/assignment.ts";

const inv = (models: (string | null)[]) => models.map((model, i) => ({ id: `w${i}`, model }));

/** Least possible moves: every target slot not filled by a worker already holding that model. */
function minimalMoves(workers: { id: string; model: string | null }[], targets: Record<string, number>): number {
  const holding: Record<string, number> = {};
  for (const w of workers) if (w.model) holding[w.model] = (holding[w.model] ?? 0) + 1;
  return Object.entries(targets).reduce((t, [m, c]) => t + Math.max(0, c - (holding[m] ?? 0)), 0);
}

describe("assignWorkers", () => {
  it("meets the targets and moves the fewest workers", () => {
    const workers = inv(["a", "a", "a", "b", "b", null, "c", "c"]);
    const targets = { a: 2, b: 4, d: 2 };
    const out = assignWorkers(workers, {}, targets);
    expect(countByModel(out)).toEqual(targets);
    const moved = workers.filter((w) => out[w.id] !== w.model).length;
    expect(moved).toBe(minimalMoves(workers, targets));
    // Workers already on a and b that are still needed stay.
    expect(out.w3).toBe("b");
    expect(out.w4).toBe("b");
  });

  it("fills from unassigned workers first, then by id", () => {
    const workers = inv(["c", null, "c", null]);
    const out = assignWorkers(workers, {}, { a: 3, c: 1 });
    expect(out.w1).toBe("a");
    expect(out.w3).toBe("a");
    expect(out.w0).toBe("c");
    expect(out.w2).toBe("a");
  });

  it("is deterministic and prefers the current assignment over the held model", () => {
    const workers = inv(["a", "a", "b", "b"]);
    const current = { w0: "b" }; // w0 is mid-swap to b
    const one = assignWorkers(workers, current, { a: 1, b: 3 });
    const two = assignWorkers([...workers].reverse(), current, { a: 1, b: 3 });
    expect(one).toEqual(two);
    expect(one.w0).toBe("b");
    expect(countSwaps({ w0: "b", w1: "a", w2: "b", w3: "b" }, one)).toBe(0);
  });

  it("moves the longest-settled surplus workers first", () => {
    const workers = inv(["a", "a", "a"]);
    const out = assignWorkers(workers, {}, { a: 2, b: 1 }, { lastSwapAtMs: { w0: 500, w1: 100, w2: 900 } });
    expect(out.w1).toBe("b");
  });

  it("leaves workers beyond the targets unassigned", () => {
    const out = assignWorkers(inv(["a", "b", null]), {}, { a: 1 });
    expect(out).toEqual({ w0: "a" });
  });
});

describe("countSwaps", () => {
  it("counts workers that change or lose their model, not new ones", () => {
    expect(countSwaps({ w0: "a", w1: "b" }, { w0: "a", w1: "c", w2: "a" })).toBe(1);
    expect(countSwaps({ w0: "a", w1: "b" }, { w0: "a" })).toBe(1);
  });
});
