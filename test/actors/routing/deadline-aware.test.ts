import { describe, expect, it } from "vitest";
import { admissionChoice, escalationFits, stageEstimateMs } from "../../../actors/routing/deadline-aware.ts";

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
