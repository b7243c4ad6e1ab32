import { describe, expect, it } from "vitest";
import { admissionChoice, escalationFits, rescueAtMs, stageEstimateMs } from "../../../actors/routing/deadline-aware.ts";

describe("hadis-plus's deadline-aware cascade", () => {
  it("estimates a stage as the rounds of batches queued ahead of it, then its own", () => {
    // 4 workers at batch 2 take 8 items a round of 270 ms: 17 queued is two rounds ahead, then its own.
    expect(stageEstimateMs(17, 4, 2, 270)).toBe(3 * 270);
    expect(stageEstimateMs(0, 4, 2, 270)).toBe(270);
    expect(stageEstimateMs(5, 0, 2, 270)).toBe(Number.POSITIVE_INFINITY);
  });

  it("runs the whole cascade when light, judge and heavy fit the time left", () => {
    expect(admissionChoice(6_000, { lightMs: 130, judgeMs: 2, heavyMs: 2_700 }, true)).toBe("cascade");
  });

  it("skips the light stage when both cannot fit but the heavy model alone does and has room; light only otherwise", () => {
    const tight = { lightMs: 1_000, judgeMs: 2, heavyMs: 4_900 };
    expect(admissionChoice(5_500, tight, true)).toBe("heavy");
    expect(admissionChoice(5_500, tight, false)).toBe("light");
    expect(admissionChoice(4_000, tight, true)).toBe("light");
  });

  it("escalates a rejected light image only when the heavy model can remake it in the time left", () => {
    expect(escalationFits(3_000, 2_700)).toBe(true);
    expect(escalationFits(2_000, 2_700)).toBe(false);
  });
});

describe("a hard prompt under hadis-plus", () => {
  it("goes to the light model, degraded, only when the heavy model cannot answer in time and the light one can", async () => {
    const { hardFallsBackToLight } = await import("../../../actors/routing/deadline-aware.ts");
    expect(hardFallsBackToLight(3_000, { lightMs: 130, heavyMs: 4_860 })).toBe(true);
    expect(hardFallsBackToLight(6_000, { lightMs: 130, heavyMs: 4_860 })).toBe(false);
    expect(hardFallsBackToLight(100, { lightMs: 130, heavyMs: 4_860 })).toBe(false);
  });
});

describe("hadis-plus's admission, as the reply carries it", () => {
  const decision = { hard: false, difficulty: 0, routerThreshold: 0.2, pair: { light: "l", heavy: "h" }, skipJudge: false, planEpoch: 3 };

  it("chooses from the path and the time left, with the estimate rounded and a stage without workers finite", async () => {
    const { admit, UNSERVED_MS } = await import("../../../actors/routing/deadline-aware.ts");
    expect(admit(false, 6_000.4, { lightMs: 130, judgeMs: 2, heavyMs: 2_700 }, true)).toEqual({
      choice: "cascade",
      leftMs: 6_000,
      lightMs: 130,
      judgeMs: 2,
      heavyMs: 2_700,
    });
    expect(admit(false, 3_000, { lightMs: 130, judgeMs: 2, heavyMs: 2_900 }, true).choice).toBe("heavy");
    expect(admit(false, 3_000, { lightMs: 130, judgeMs: 2, heavyMs: 2_900 }, false).choice).toBe("light");
    // A hard prompt: the heavy model unless only the light one can answer in time.
    expect(admit(true, 3_000, { lightMs: 130, judgeMs: 2, heavyMs: 2_900 }, false).choice).toBe("heavy");
    const none = admit(true, 3_000, { lightMs: 130, judgeMs: 2, heavyMs: Number.POSITIVE_INFINITY }, false);
    expect(none).toMatchObject({ choice: "light", heavyMs: UNSERVED_MS });
  });

  it("turns the routed decision accordingly, the admission riding along", async () => {
    const { admitted } = await import("../../../actors/routing/deadline-aware.ts");
    const estimate = { leftMs: 1, lightMs: 1, judgeMs: 1, heavyMs: 1 };
    expect(admitted(decision, { choice: "heavy", ...estimate })).toMatchObject({ hard: true, skipJudge: false });
    expect(admitted({ ...decision, hard: true }, { choice: "light", ...estimate })).toMatchObject({ hard: false, skipJudge: true });
    expect(admitted(decision, { choice: "light", ...estimate })).toMatchObject({
      hard: false,
      skipJudge: false,
      admission: { choice: "light" },
    });
    expect(admitted(decision, { choice: "cascade", ...estimate })).toEqual({ ...decision, admission: { choice: "cascade", ...estimate } });
  });
});

describe("hadis-plus's admission of a routed request", () => {
  const decision = { hard: false, difficulty: 0, routerThreshold: 0.2, pair: { light: "l", heavy: "h" }, skipJudge: false, planEpoch: 3 };
  const plan = { policy: "hadis-plus", pair: decision.pair };
  // Time for the heavy model alone: a light-routed prompt goes straight to it when admitted.
  const path = () => ({ stageMs: (m: string) => (m === "l" ? 1_000 : 2_500), hasRoom: () => true, judgeMs: 0 });

  it("admits under a deadline-aware cascade plan, and leaves the decision as routed otherwise", async () => {
    const { admitRouted } = await import("../../../actors/routing/deadline-aware.ts");
    expect(admitRouted(plan, decision, 3_000, false, path)).toMatchObject({ hard: true, admission: { choice: "heavy" } });
    let read = 0;
    const counted = () => (read++, path());
    for (const [p, d, leftMs, pinned] of [
      [{ ...plan, policy: "hadis" }, decision, 3_000, false],
      [{ ...plan, pair: { light: "l", heavy: "l" } }, decision, 3_000, false],
      [plan, decision, undefined, false],
      [plan, decision, 3_000, true],
      [plan, { ...decision, skipJudge: true }, 3_000, false],
    ] as const)
      expect(admitRouted(p, d, leftMs, pinned, counted)).toBe(d);
    // The path is not read when the admission does not apply.
    expect(read).toBe(0);
  });
});

describe("rescueAtMs", () => {
  it("is the last moment the light model's path and the reply's margin fit before the deadline", () => {
    expect(rescueAtMs(10_000, 1_300, 25)).toBe(8_675);
    expect(rescueAtMs(10_000, 0, 25)).toBe(9_975);
  });
});
