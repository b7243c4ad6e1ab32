import { describe, expect, it } from "vitest";
import {
  checkGenerationOptions,
  misfit,
  servingModels,
  withQuality,
  type ModelRanges,
} from "../../../actors/routing/generation-options.ts";
import { HadisError } from "../../../contracts/errors.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";
import type { RouteDecision } from "../../../actors/request/types.ts";

const profiles = loadProfiles();
const rangesOf = (name: string): ModelRanges => profiles.byName.get(name) ?? { name };
const PAIR = { light: "sd35-large-turbo", heavy: "sd35-large" };

function refusal(run: () => void): HadisError {
  try {
    run();
  } catch (err) {
    return err as HadisError;
  }
  throw new Error("not refused");
}

describe("generation settings against the models that may serve them", () => {
  it("quality picks the models: fast the light one, best the heavy one, auto both", () => {
    expect(servingModels(PAIR, "fast")).toEqual([PAIR.light]);
    expect(servingModels(PAIR, "best")).toEqual([PAIR.heavy]);
    expect(servingModels(PAIR)).toEqual([PAIR.light, PAIR.heavy]);
    expect(servingModels({ light: "m", heavy: "m" })).toEqual(["m"]);
  });

  it("accepts what the profiles list and refuses the rest, naming the field and the range", () => {
    expect(misfit({ width: 1024, height: 1024, steps: 30, guidanceScale: 4 }, rangesOf("sd35-large"))).toBeNull();
    expect(misfit({ negativePrompt: "blurry" }, rangesOf("sdxl-lightning"))).toBeNull(); // accepted; the reply says it was not used
    expect(misfit({ width: 1000, height: 1000 }, rangesOf("sd35-large"))).toMatchObject({
      field: "width",
      reason: expect.stringContaining("1000x1000 is not a size sd35-large makes (1024x1024, "),
    });
    expect(misfit({ steps: 90 }, rangesOf("sd35-large"))).toEqual({
      field: "steps",
      reason: "steps 90 is outside sd35-large's range 10 to 80",
    });
    expect(misfit({ guidanceScale: 4 }, rangesOf("sdxl-lightning"))).toEqual({
      field: "guidanceScale",
      reason: "guidanceScale 4 is outside sdxl-lightning's range 0 to 1",
    });
    expect(misfit({ steps: 4 }, { name: "bare" })).toEqual({
      field: "steps",
      reason: "bare takes no steps (its profile lists no generation options)",
    });
  });

  it("with auto, a setting only one model of the pair supports is refused with a hint to pin it", () => {
    const e = refusal(() => checkGenerationOptions({ steps: 30 }, undefined, PAIR, rangesOf));
    expect(e.code).toBe("invalid_request");
    expect(e.details).toMatchObject({ field: "steps", model: PAIR.light });
    expect(e.message).toBe(
      `steps 30 is outside sd35-large-turbo's range 1 to 8; with quality "auto" either sd35-large-turbo (light) or sd35-large (heavy) may serve it: ask for quality "best" to have sd35-large serve it`,
    );
    // Pinned to the model that supports it: accepted.
    expect(() => checkGenerationOptions({ steps: 30 }, "best", PAIR, rangesOf)).not.toThrow();
    const pinned = refusal(() => checkGenerationOptions({ steps: 30 }, "fast", PAIR, rangesOf));
    expect(pinned.message).toBe("steps 30 is outside sd35-large-turbo's range 1 to 8 (the light model of the plan in force)");
  });

  it("fast serves the light image unjudged; best goes straight to the heavy model; auto keeps the policy's decision", () => {
    const decision: RouteDecision = { hard: true, difficulty: 1, routerThreshold: 0.2, pair: PAIR, skipJudge: false, planEpoch: 3 };
    expect(withQuality(decision, "fast")).toMatchObject({ hard: false, skipJudge: true });
    expect(withQuality({ ...decision, hard: false }, "best")).toMatchObject({ hard: true, skipJudge: false });
    expect(withQuality(decision, "auto")).toBe(decision);
    expect(withQuality(decision, undefined)).toBe(decision);
  });

  it("every pool model's profile lists the settings it supports", () => {
    for (const name of profiles.pool.models) {
      const options = profiles.byName.get(name)!.options!;
      expect(options.sizes.length, name).toBeGreaterThan(0);
      expect(options.steps.min, name).toBeLessThanOrEqual(options.steps.max);
    }
  });
});
