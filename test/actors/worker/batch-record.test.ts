import { describe, expect, it } from "vitest";
import { BatchRecord, CAP_RUNS_TO_GROW } from "../../../actors/worker/batch-record.ts";
import type { SplitOutcome } from "../../../actors/worker/bisect.ts";

const ran = (over: Partial<SplitOutcome<unknown>>): SplitOutcome<unknown> => ({
  failed: [],
  notRun: [],
  dropped: [],
  served: 0,
  runs: 1,
  whole: false,
  largestRun: 0,
  ...over,
});
const failedAll = (n: number) => ran({ failed: Array.from({ length: n }, () => ({ item: null, error: new Error("x") })), runs: 2 * n - 1 });

describe("BatchRecord", () => {
  it("calls the model failing after batches failed in every item in a row, on two prompts, until one runs", () => {
    const r = new BatchRecord();
    r.learn(["bad"], failedAll(1), 4);
    r.learn(["bad"], failedAll(1), 4);
    r.learn(["bad"], failedAll(1), 4);
    expect([r.inARow, r.failing(3)]).toEqual([3, false]); // one prompt: maybe the prompt
    r.learn(["other"], failedAll(1), 4);
    expect(r.failing(3)).toBe(true);
    r.learn(["a", "b"], ran({ served: 2, whole: true, largestRun: 2 }), 4);
    expect([r.inARow, r.failing(1)]).toEqual([0, false]);
  });

  it("reads items dropped (expired) between the parts of a failed batch as neither served nor failed", () => {
    const r = new BatchRecord();
    // Four items: the whole batch failed, two expired, the other two ran alone: too big, cap 1.
    r.learn(["a", "b", "c", "d"], ran({ served: 2, dropped: [null, null], runs: 3, largestRun: 1 }), 8);
    expect(r.size(8)).toBe(1);
    // Nothing ran and nothing failed alone (all expired after the first run): no failure of the model.
    const s = new BatchRecord();
    s.learn(["a", "b"], ran({ dropped: [null, null], runs: 1, firstError: new Error("out of memory") }), 8);
    expect([s.inARow, s.size(8)]).toEqual([0, 8]);
  });

  it("takes the largest part that ran after a batch too big, not after a bad item, and doubles back after enough whole runs", () => {
    const r = new BatchRecord();
    // A bad item failed alone, the rest ran in parts: no cap.
    r.learn(["a", "b", "c", "d"], ran({ served: 3, failed: [{ item: null, error: new Error("x") }], largestRun: 2 }), 8);
    expect(r.size(8)).toBe(8);
    // All ran, in parts of 2 at most: the cap is 2.
    r.learn(Array(8).fill("p"), ran({ served: 8, runs: 7, largestRun: 2 }), 8);
    expect(r.size(8)).toBe(2);
    for (let i = 0; i < CAP_RUNS_TO_GROW - 1; i++) r.learn(["p", "q"], ran({ served: 2, whole: true, largestRun: 2 }), 8);
    expect(r.size(8)).toBe(2);
    r.learn(["p"], ran({ served: 1, whole: true, largestRun: 1 }), 8); // smaller than the cap: no evidence
    expect(r.size(8)).toBe(2);
    r.learn(["p", "q"], ran({ served: 2, whole: true, largestRun: 2 }), 8);
    expect(r.size(8)).toBe(4);
    for (let i = 0; i < CAP_RUNS_TO_GROW; i++) r.learn(Array(4).fill("p"), ran({ served: 4, whole: true, largestRun: 4 }), 8);
    expect(r.size(16)).toBe(16); // reached the plan's 8: no cap
    r.learn(Array(8).fill("p"), ran({ served: 8, runs: 3, largestRun: 4 }), 8);
    r.reset();
    expect([r.size(8), r.inARow]).toEqual([8, 0]);
  });
});
