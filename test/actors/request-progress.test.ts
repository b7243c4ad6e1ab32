import { describe, expect, it } from "vitest";
import { progressBetween, splitAtHeavy, type ProgressView } from "../../actors/request/progress.ts";
import type { RouteDecision } from "../../actors/request/types.ts";

const decision: RouteDecision = {
  hard: false,
  difficulty: 0,
  routerThreshold: 0.2,
  pair: { light: "l", heavy: "h" },
  skipJudge: false,
  planEpoch: 4,
};
const light = { image: new Uint8Array(), width: 1, height: 1, model: "l", workerId: "w", batchSize: 1, queueWaitMs: 0, execMs: 12 };

describe("a request's progress read off its machine's snapshots", () => {
  it("reports each step once, in order, across an escalation", () => {
    const views: ProgressView[] = [
      { value: "routing", context: {} },
      { value: "light", context: { decision } },
      { value: "judging", context: { decision, light } },
      // The machine in its heavy stage, waiting alone (a substate: the light model may race it later).
      { value: { heavy: "alone" }, context: { decision, light, judge: { score: 0.1, threshold: 0.5, accept: false } } },
      { value: { heavy: "racing" }, context: { decision, light, judge: { score: 0.1, threshold: 0.5, accept: false } } },
      { value: "served", context: { decision, light, judge: { score: 0.1, threshold: 0.5, accept: false } } },
    ];
    const steps = views.flatMap((v, i) => progressBetween(views[i - 1], v));
    expect(steps.map((s) => s.kind)).toEqual(["routed", "light_done", "judged", "heavy_running"]);
    expect(steps[3]).toEqual({ kind: "heavy_running", model: "h", escalated: true });
  });

  it("a snapshot that skips states still reports what it holds (routed and light done at once)", () => {
    expect(progressBetween(undefined, { value: "accepted", context: { decision, light } }).map((s) => s.kind)).toEqual([
      "routed",
      "light_done",
    ]);
    expect(progressBetween(undefined, { value: "heavy", context: { decision: { ...decision, hard: true } } })).toEqual([
      { kind: "routed", hard: true, pair: decision.pair, planEpoch: 4 },
      { kind: "heavy_running", model: "h", escalated: false },
    ]);
  });
});

describe("a preview among a snapshot's steps", () => {
  it("goes after the verdict and before the heavy stage starts", () => {
    const judged = { kind: "judged", score: 0.1, threshold: 0.5, accept: false } as const;
    const heavy = { kind: "heavy_running", model: "h", escalated: true } as const;
    expect(splitAtHeavy([judged, heavy])).toEqual([[judged], [heavy]]);
    expect(splitAtHeavy([judged])).toEqual([[judged], []]);
    expect(splitAtHeavy([])).toEqual([[], []]);
  });
});
