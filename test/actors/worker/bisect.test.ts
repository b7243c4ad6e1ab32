import { describe, expect, it } from "vitest";
import { runSplitting } from "../../../actors/worker/bisect.ts";

/** Items are numbers; an attempt fails when `fails` says so of the items it got; `seen` records every attempt. */
function setup(fails: (items: readonly number[]) => boolean, stopAfterRuns = Infinity) {
  const seen: number[][] = [];
  const served: number[][] = [];
  const attempt = async (items: readonly number[]) => {
    seen.push([...items]);
    return fails(items)
      ? { ok: false as const, error: new Error(`failed ${items.join(",")}`) }
      : { ok: true as const, results: items.map((i) => i * 10) };
  };
  const ports = {
    served: (items: readonly number[], results: number[]) => void served.push(results),
    stopped: () => seen.length >= stopAfterRuns,
  };
  return { seen, served, go: (items: number[]) => runSplitting(items, attempt, ports) };
}

describe("runSplitting", () => {
  it("runs a batch that works once, whole", async () => {
    const t = setup(() => false);
    const run = await t.go([1, 2, 3]);
    expect(run).toEqual({ failed: [], notRun: [], dropped: [], served: 3, runs: 1, whole: true, largestRun: 3 });
    expect(t.served).toEqual([[10, 20, 30]]);
  });

  it("isolates bad items in halving steps, handing on each part that runs as it runs", async () => {
    const t = setup((items) => items.includes(2) || items.includes(6));
    const run = await t.go([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(t.seen).toEqual([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4], [1, 2], [1], [2], [3, 4], [5, 6, 7, 8], [5, 6], [5], [6], [7, 8]]);
    expect(t.served).toEqual([[10], [30, 40], [50], [70, 80]]);
    expect(run.failed.map((f) => f.item)).toEqual([2, 6]);
    expect([run.served, run.runs, run.whole, run.largestRun]).toEqual([6, 11, false, 2]);
  });

  it("runs a batch too big in parts that fit, however small", async () => {
    const t = setup((items) => items.length > 2);
    const run = await t.go([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(t.served).toEqual([
      [10, 20],
      [30, 40],
      [50, 60],
      [70, 80],
    ]);
    expect([run.failed.length, run.served, run.runs, run.largestRun]).toEqual([0, 8, 7, 2]);
  });

  it("fails every item alone when every run fails (a model that does not run)", async () => {
    const t = setup(() => true);
    const run = await t.go([1, 2, 3]);
    expect(t.seen).toEqual([[1, 2, 3], [1, 2], [1], [2], [3]]);
    expect(run.failed.map((f) => f.item)).toEqual([1, 2, 3]);
    expect([run.served, run.largestRun]).toEqual([0, 0]);
  });

  it("splits no further once stopped: a failed part fails, parts not run are said", async () => {
    const t = setup((items) => items.length > 1, 3);
    const run = await t.go([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(t.seen).toEqual([
      [1, 2, 3, 4, 5, 6, 7, 8],
      [1, 2, 3, 4],
      [1, 2],
    ]);
    expect(run.failed.map((f) => f.item)).toEqual([1, 2]);
    expect(run.notRun).toEqual([3, 4, 5, 6, 7, 8]);
  });

  it("does not run again what `keep` leaves out after a failure (a deadline passed meanwhile), and counts it dropped", async () => {
    const seen: number[][] = [];
    let expired = new Set<number>();
    const run = await runSplitting(
      [1, 2, 3, 4],
      async (items) => {
        seen.push([...items]);
        if (items.length === 4) {
          expired = new Set([2, 3]); // the failed run took long enough for two deadlines to pass
          return { ok: false as const, error: new Error("out of memory") };
        }
        return { ok: true as const, results: items.map((i) => i * 10) };
      },
      { served: () => undefined, stopped: () => false, keep: (items) => items.filter((i) => !expired.has(i)) },
    );
    expect(seen).toEqual([[1, 2, 3, 4], [1], [4]]);
    expect(run.dropped).toEqual([2, 3]);
    expect([run.served, run.failed.length, run.notRun.length]).toEqual([2, 0, 0]);
  });
});
